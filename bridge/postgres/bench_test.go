package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
)

// benchServe starts a bridge HTTP server on store and returns its URL.
func benchServe(b *testing.B, store bridge.Store) string {
	srv, err := bridge.NewServer(store, bridge.Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Open(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	return srv.URL()
}

// BenchmarkAppendsPostgres measures appends/s over HTTP at 32 clients
// spread over 100 threads, in one run: SQLite (one bridge), PostgreSQL
// with one bridge, and PostgreSQL with two bridges on one database (the
// clients alternate between them). PostgreSQL runs with its default
// durability (fsync, synchronous commit), as SQLite keeps its own.
func BenchmarkAppendsPostgres(b *testing.B) {
	srv := pgtest.NewDurable()
	b.Cleanup(srv.Stop)
	const clients, threads = 32, 100
	setup := map[string]func(b *testing.B) []string{
		"sqlite": func(b *testing.B) []string {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return []string{benchServe(b, s)}
		},
		"postgres-1-bridge": func(b *testing.B) []string {
			return []string{benchServe(b, openStore(b, srv.Database(b), Options{}))}
		},
		"postgres-2-bridges": func(b *testing.B) []string {
			url := srv.Database(b)
			return []string{benchServe(b, openStore(b, url, Options{})), benchServe(b, openStore(b, url, Options{}))}
		},
	}
	for _, name := range []string{"sqlite", "postgres-1-bridge", "postgres-2-bridges"} {
		b.Run(name, func(b *testing.B) {
			urls := setup[name](b)
			ctx := context.Background()
			for i := range threads {
				if _, err := client.New(urls[0]).CreateThread(ctx, agentbridge.CreateThreadRequest{ID: fmt.Sprintf("t%d", i)}); err != nil {
					b.Fatal(err)
				}
			}
			body, _ := json.Marshal(map[string]any{"from": "user", "content": strings.Repeat("benchmark message ", 8)})
			tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
			b.Cleanup(tr.CloseIdleConnections)
			hc := &http.Client{Transport: tr}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for c := range clients {
				wg.Go(func() {
					base := urls[c%len(urls)]
					for {
						n := next.Add(1)
						if n > int64(b.N) {
							return
						}
						resp, err := hc.Post(fmt.Sprintf("%s/threads/t%d/events", base, n%threads), "application/json", bytes.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						// Read to the end, so that the connection is kept.
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
							b.Errorf("append: HTTP %d", resp.StatusCode)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// BenchmarkCrossBridgeWake measures how long an event appended through one
// bridge takes to reach an SSE subscriber of another bridge on the same
// PostgreSQL database: from the start of the POST to the event's arrival
// on the stream, one append at a time. It reports p50 and p99.
func BenchmarkCrossBridgeWake(b *testing.B) {
	srv := pgtest.NewDurable()
	b.Cleanup(srv.Stop)
	url := srv.Database(b)
	a, other := benchServe(b, openStore(b, url, Options{})), benchServe(b, openStore(b, url, Options{}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca := client.New(a)
	if _, err := ca.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
		b.Fatal(err)
	}
	stream, err := client.New(other).StreamAll(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stream.Close() }()
	arrived := make(chan time.Time, 1)
	go func() {
		for {
			it, err := stream.Next()
			if err != nil {
				return
			}
			if it.Event != nil {
				arrived <- time.Now()
			}
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := ca.Append(ctx, "t", agentbridge.EventInput{From: "user", Content: []byte(`"ping"`)}, ""); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-arrived:
			lat = append(lat, at.Sub(start))
		case <-time.After(10 * time.Second):
			b.Fatal("the event did not reach the other bridge's stream within 10 s")
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
