package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK checks a call's arguments against the tool's schema and then
// decodes them into the tool's Go input type; both failures reach the
// model as a tool error in the words of the layer that failed, which name
// Go types and struct fields (mcpserver.listThreadsIn.limit) or schema
// paths. These patterns find the argument in them, so that the model reads
// the argument's name as the tool's schema has it.
var (
	// json: cannot unmarshal "1e+30" into Go struct field mcpserver.listThreadsIn.limit of type int
	reGoField = regexp.MustCompile(`cannot unmarshal (.+?) into Go struct field [\w]+\.[\w]+\.([\w.]+) of type (\w+)`)
	// validating /properties/limit: type: x has type "string", want "integer"
	reSchemaType = regexp.MustCompile(`validating /properties/(\w+): type: (.*) has type "(\w+)", want "(\w+)"`)
	// unexpected additional properties ["bogus"]
	reExtra = regexp.MustCompile(`unexpected additional properties (\[.*\])`)
	// required: missing properties: ["content"]
	reMissing = regexp.MustCompile(`missing properties:? (\[.*\])`)
)

// kindWords names a Go or JSON Schema type as a person says it.
var kindWords = map[string]string{
	"int": "a whole number", "int64": "a whole number", "int32": "a whole number", "integer": "a whole number",
	"number": "a number", "string": "text (a JSON string)", "boolean": "true or false", "bool": "true or false",
	"array": "a list", "object": "an object", "null": "null",
}

func kindWord(k string) string {
	if w, ok := kindWords[k]; ok {
		return w
	}
	return k
}

// argError rewrites an SDK argument error into "invalid <argument>: …",
// the form of the tools' own argument errors; ok is false for any other
// error text, which is left alone.
func argError(msg string) (string, bool) {
	if m := reGoField.FindStringSubmatch(msg); m != nil {
		val := strings.Trim(m[1], `"`)
		if m[3] == "int" || m[3] == "int64" {
			return fmt.Sprintf("invalid %s: %s is not a whole number this tool can take; see the tool's description for its range.", m[2], val), true
		}
		return fmt.Sprintf("invalid %s: %s is not %s.", m[2], val, kindWord(m[3])), true
	}
	if m := reSchemaType.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid %s: it must be %s, not %s (%s).", m[1], kindWord(m[4]), agentbridge.Clip(m[2], 41), kindWord(m[3])), true
	}
	if m := reExtra.FindStringSubmatch(msg); m != nil {
		var names []string
		if json.Unmarshal([]byte(m[1]), &names) == nil {
			return fmt.Sprintf("unknown argument %s: this tool does not take it (see its input schema).", strings.Join(quoteAll(names), ", ")), true
		}
	}
	if m := reMissing.FindStringSubmatch(msg); m != nil {
		var names []string
		if json.Unmarshal([]byte(m[1]), &names) == nil {
			return fmt.Sprintf("missing argument %s: this tool needs it.", strings.Join(quoteAll(names), ", ")), true
		}
	}
	return msg, false
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// friendlyArgErrors is the receiving middleware that applies argError to
// the text of a failed tool call.
func friendlyArgErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" {
			return res, err
		}
		if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					tc.Text, _ = argError(tc.Text)
				}
			}
		}
		return res, err
	}
}
