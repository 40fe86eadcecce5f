package agentbridge

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The scopes of a credential (contract 7.3). A scope says what its holder
// may do; the binding (Token.Thread, Token.Participant) narrows it.
const (
	// ScopePerson is the owner's credential: everything, including human
	// controls, answers to permission requests and questions, and posting
	// as any participant.
	ScopePerson = "person"
	// ScopeCoordinator is a coordinator's: append as any non-human
	// participant and as its own id (Token.Participant), follow, mint and
	// revoke agent tokens; never as a human, never a human control or an
	// answer.
	ScopeCoordinator = "coordinator"
	// ScopeAgent is one run's or one warm session's: append messages (and
	// presence, receipts) as its bound participant in its bound thread,
	// and read that thread.
	ScopeAgent = "agent"
	// ScopeRead reads and never writes.
	ScopeRead = "read"
)

// TokenPrefix starts every token the bridge mints, so that one pasted
// into the wrong place (a log, a chat, a commit) is recognisable.
const TokenPrefix = "abt_"

// tokenSecretBytes is a token's randomness: 256 bits.
const tokenSecretBytes = 32

// MaxAgentTokenTTL caps an agent token's life, a safety net for a
// coordinator that dies before it revokes its per-run tokens. An agent
// token asked for without a ttl gets this one.
const MaxAgentTokenTTL = 24 * time.Hour

// TokenRetention is how long a revoked or expired token stays listed
// (tokens list --all) before the bridge deletes it (TokenStore.PruneTokens).
const TokenRetention = 24 * time.Hour

// CreatedByServe is the Token.CreatedBy of a person token serve or up made
// for its state folder. Such a token is never pruned: its secret stays in
// the state folder's file, which serve registers again when the database
// does not know it, so deleting its row would bring a revoked token back.
const CreatedByServe = "serve"

// TokenNamePattern matches a token's name: what a person calls it in
// `tokens list` and `tokens revoke NAME`.
var TokenNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$`)

// TokenIDPattern matches what could be a token's id (a ULID); stores
// answer any other id as not found without asking the database.
var TokenIDPattern = regexp.MustCompile(`^[0-9A-Za-z]{1,64}$`)

// Token is a stored credential, without its secret: the store keeps only
// the secret's SHA-256 (docs/security.md says why a plain hash is right
// for random tokens).
type Token struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Scope string `json:"scope"`
	// Thread and Participant bind an agent token (both set); Participant
	// alone binds a coordinator token to its own id.
	Thread      string `json:"thread,omitempty"`
	Participant string `json:"participant,omitempty"`
	CreatedAt   string `json:"created_at"`
	// ExpiresAt is empty for a token that does not expire.
	ExpiresAt string `json:"expires_at,omitempty"`
	// RevokedAt is empty for a token not revoked.
	RevokedAt string `json:"revoked_at,omitempty"`
	// CreatedBy names the credential that made it (its name and id), or
	// the command that did ("serve").
	CreatedBy string `json:"created_by,omitempty"`
	// Agents is a coordinator token's allow-list: the agent names (and
	// clients) its registrations may list, joined by commas (which no
	// name holds, and which keeps a Token comparable); empty for no list.
	Agents string `json:"agents,omitempty"`
}

// AllowedAgents is an allow-list as Token.Agents and Credential.Agents
// keep it, split; nil for none.
func AllowedAgents(agents string) []string {
	if agents == "" {
		return nil
	}
	return strings.Split(agents, ",")
}

// Valid reports whether the token may be used at now: not revoked and not
// expired.
func (t Token) Valid(now time.Time) bool {
	if t.RevokedAt != "" {
		return false
	}
	if t.ExpiresAt == "" {
		return true
	}
	exp, err := ParseTime(t.ExpiresAt)
	return err == nil && now.Before(exp)
}

// Credential is who a request speaks for (contract 7.3): the token's id,
// name and scope and its binding. GET /auth/whoami answers it.
type Credential struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Scope       string `json:"scope"`
	Thread      string `json:"thread,omitempty"`
	Participant string `json:"participant,omitempty"`
	// Agents is a coordinator token's allow-list (Token.Agents).
	Agents string `json:"agents,omitempty"`
}

// Whoami is the answer of GET /auth/whoami: the caller's credential,
// whether the server takes requests without a token (serve --open), and
// the participant id the credential writes as (the web UI posts as it).
type Whoami struct {
	Credential
	Open bool `json:"open"`
	// Sender is whom the credential writes as: for a person token, the
	// human it is named after, else the bridge's first human; for an
	// agent or a coordinator token, its participant; "" for a read token.
	Sender string `json:"sender,omitempty"`
}

// TokenInput is a token to create: POST /auth/tokens, or serve's first
// person token.
type TokenInput struct {
	Scope       string `json:"scope"`
	Name        string `json:"name"`
	Thread      string `json:"thread,omitempty"`
	Participant string `json:"participant,omitempty"`
	// TTLSeconds, when above 0, makes the token expire that long after it
	// is made.
	TTLSeconds int64 `json:"ttl_s,omitempty"`
	// Agents is a coordinator token's allow-list (Token.Agents).
	Agents []string `json:"agents,omitempty"`
	// CreatedBy is set by the server, never by the client.
	CreatedBy string `json:"-"`
	// MaxLive, set by the server, caps the live agent tokens CreatedBy
	// holds, this one included (contract 8.3): the store refuses past it
	// with ECodeTooMany, in the write itself. 0: no cap.
	MaxLive int `json:"-"`
}

// The pages of GET /auth/tokens: DefaultTokensPage tokens unless the
// request asks for up to MaxTokensPage.
const (
	DefaultTokensPage = 500
	MaxTokensPage     = 1000
)

// TokensPage is the answer of GET /auth/tokens: a page of tokens, oldest
// first, and Next, the after= of the next page (0 on the last page).
type TokensPage struct {
	Tokens []Token `json:"tokens"`
	Next   int64   `json:"next,omitempty"`
}

// AgentTokenCap is how many live agent tokens a coordinator that
// registered capacity may hold (contract 8.3): enough for each running
// run's token, its correction run's, a spare per pair made ahead and the
// warm ACP agents' (docs/security.md), and no more.
func AgentTokenCap(capacity int) int { return 4*capacity + 16 }

// MaxTokenAgents bounds a coordinator token's allow-list, as a
// registration's agents.
const MaxTokenAgents = MaxCoordinatorAgents

// TooManyAgentTokens is the refusal of an agent token past the creator's
// cap of live ones.
func TooManyAgentTokens(limit int) *Error {
	return Errorf(ECodeTooMany, "This coordinator holds %d live agent tokens, the most it may (4 × its registered capacity + 16); revoke the ones its ended runs held, or wait for them to expire.", limit)
}

// Validate checks a token to create and fills in an agent token's ttl cap:
// a known scope, a name, the binding each scope takes (an agent token
// needs a thread and a participant; a coordinator token may name its own
// participant id; the others take none).
func (in *TokenInput) Validate() error {
	switch in.Scope {
	case ScopePerson, ScopeCoordinator, ScopeAgent, ScopeRead:
	case "":
		return FieldErrorf(ECodeMissingField, "scope", "The field \"scope\" is required: %q, %q, %q or %q.", ScopePerson, ScopeCoordinator, ScopeAgent, ScopeRead)
	default:
		return FieldErrorf(ECodeInvalidField, "scope", "The scope %q is not one of %q, %q, %q or %q.", Clip(in.Scope, QuoteRunes), ScopePerson, ScopeCoordinator, ScopeAgent, ScopeRead)
	}
	if in.Name == "" {
		return FieldErrorf(ECodeMissingField, "name", "The field \"name\" is required: what you will call this token in the list.")
	}
	if !TokenNamePattern.MatchString(in.Name) {
		return FieldErrorf(ECodeInvalidField, "name", "The token name %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(in.Name, QuoteRunes))
	}
	if in.Thread != "" && !ThreadIDPattern.MatchString(in.Thread) {
		return FieldErrorf(ECodeInvalidField, "thread", "The thread id %q is not valid.", Clip(in.Thread, QuoteRunes))
	}
	if in.Participant != "" && !ParticipantIDPattern.MatchString(in.Participant) {
		return FieldErrorf(ECodeInvalidField, "participant", "The participant id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(in.Participant, QuoteRunes))
	}
	if in.TTLSeconds < 0 {
		return FieldErrorf(ECodeInvalidField, "ttl_s", "The ttl must be a positive number of seconds (or left out for no expiry).")
	}
	switch in.Scope {
	case ScopeAgent:
		if in.Thread == "" || in.Participant == "" {
			field := "thread"
			if in.Thread != "" {
				field = "participant"
			}
			return FieldErrorf(ECodeMissingField, field, "An agent token is bound to one thread and one participant: give both \"thread\" and \"participant\".")
		}
		if max := int64(MaxAgentTokenTTL / time.Second); in.TTLSeconds == 0 || in.TTLSeconds > max {
			if in.TTLSeconds > max {
				return FieldErrorf(ECodeInvalidField, "ttl_s", "An agent token lives at most %d seconds (%s).", max, MaxAgentTokenTTL)
			}
			in.TTLSeconds = max
		}
	case ScopeCoordinator:
		if in.Thread != "" {
			return FieldErrorf(ECodeFieldNotAllowed, "thread", "A coordinator token is not bound to a thread; only an agent token is.")
		}
		return validTokenAgents(in.Agents)
	default:
		if in.Thread != "" || in.Participant != "" {
			field := "thread"
			if in.Thread == "" {
				field = "participant"
			}
			return FieldErrorf(ECodeFieldNotAllowed, field, "A %s token is not bound to a thread or a participant.", in.Scope)
		}
	}
	if len(in.Agents) > 0 {
		return FieldErrorf(ECodeFieldNotAllowed, "agents", "Only a coordinator token carries a list of agents.")
	}
	return nil
}

// validTokenAgents checks a coordinator token's allow-list: participant
// ids, each once, at most MaxTokenAgents.
func validTokenAgents(agents []string) error {
	if len(agents) > MaxTokenAgents {
		return FieldErrorf(ECodeInvalidField, "agents", "A coordinator token lists at most %d agents, not %d.", MaxTokenAgents, len(agents))
	}
	for i, a := range agents {
		if !ParticipantIDPattern.MatchString(a) {
			return FieldErrorf(ECodeInvalidField, "agents", "The agent name %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(a, QuoteRunes))
		}
		if slices.Contains(agents[:i], a) {
			return FieldErrorf(ECodeInvalidField, "agents", "The agent %q is listed twice.", a)
		}
	}
	return nil
}

// Expiry is when a token made at now from this input expires (zero for
// none).
func (in TokenInput) Expiry(now time.Time) time.Time {
	if in.TTLSeconds <= 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(in.TTLSeconds) * time.Second)
}

// NewTokenSecret returns a fresh token: TokenPrefix and 256 random bits
// in URL-safe base64.
func NewTokenSecret() (string, error) {
	b := make([]byte, tokenSecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashToken is what a store keeps of a token, and looks it up by: its
// SHA-256. A token is 256 random bits, so no guess or precomputed table
// reaches it, and a slow password hash would only slow every request.
func HashToken(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// TokenNotFound is the error for a token id no token has.
func TokenNotFound(id string) *Error {
	return Errorf(ECodeTokenNotFound, "There is no token %q.", Clip(id, QuoteRunes))
}

// TokenStore keeps the bridge's credentials (contract 7.3). A backend
// implements it next to EventStore; the bridge serves /auth/tokens only
// when its store does. Implementations are safe for concurrent use.
type TokenStore interface {
	// CreateToken stores a token made from in (validated by the caller)
	// whose secret hashes to hash, stamped with the time of the write,
	// expiring in.TTLSeconds after it.
	CreateToken(ctx context.Context, in TokenInput, hash []byte) (Token, error)
	// TokenByHash returns the token whose secret hashes to hash, revoked
	// or expired ones included (the caller asks Token.Valid); ok is false
	// when there is none.
	TokenByHash(ctx context.Context, hash []byte) (t Token, ok bool, err error)
	// TokenByID returns token id, revoked or expired ones included; ok is
	// false when there is none.
	TokenByID(ctx context.Context, id string) (t Token, ok bool, err error)
	// Tokens lists every token, oldest first.
	Tokens(ctx context.Context) ([]Token, error)
	// TokensAfter lists at most limit tokens, oldest first, made after
	// the one at position after (0: from the first), with each one's
	// position: GET /auth/tokens's pages.
	TokensAfter(ctx context.Context, after int64, limit int) (tokens []Token, positions []int64, err error)
	// CoordinatorTokenIDs lists the coordinator ids the coordinator
	// tokens not revoked stand for (each one's participant, else its
	// name): ids no registration may list as its agent.
	CoordinatorTokenIDs(ctx context.Context) ([]string, error)
	// RevokeToken stamps the token's revoked_at with the time of the
	// write, unless it is revoked already (then it is returned as it
	// was). An unknown id is token_not_found.
	RevokeToken(ctx context.Context, id string) (Token, error)
	// PruneTokens deletes the tokens revoked before cutoff and those that
	// expired before it, except the ones made by serve (CreatedByServe),
	// and returns how many it deleted.
	PruneTokens(ctx context.Context, cutoff time.Time) (int64, error)
}
