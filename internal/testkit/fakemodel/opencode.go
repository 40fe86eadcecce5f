package fakemodel

import (
	"encoding/json"
	"fmt"
)

// OpenCodeProvider is the provider id OpenCodeConfig defines; OpenCode
// names a model "<provider>/<model>".
const OpenCodeProvider = "fake"

// OpenCodePrice is what OpenCodeConfig says the model costs, in dollars a
// million tokens, input and output: OpenCode prices a turn from it.
var OpenCodePrice = [2]float64{3, 15}

// OpenCodeConfig is an opencode.json (OPENCODE_CONFIG names it) that points
// OpenCode at s: a custom OpenAI-compatible provider (OpenCodeProvider,
// the Chat Completions API) whose key OpenCode reads from the environment
// variable envKey, with model as the model of every call (the title ones
// too), its context size (without which OpenCode sends no usage_update)
// and its price; no update check, no sharing, no provider but this one.
// permission is OpenCode's "permission" setting, nil for its default (it
// runs every tool without asking).
func (s *Server) OpenCodeConfig(model, envKey string, permission map[string]any) string {
	ref := OpenCodeProvider + "/" + model
	cfg := map[string]any{
		"$schema":           "https://opencode.ai/config.json",
		"model":             ref,
		"small_model":       ref,
		"autoupdate":        false,
		"share":             "disabled",
		"enabled_providers": []string{OpenCodeProvider},
		"provider": map[string]any{OpenCodeProvider: map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "fake model server",
			"options": map[string]any{"baseURL": s.URL() + "/v1", "apiKey": fmt.Sprintf("{env:%s}", envKey)},
			"models": map[string]any{model: map[string]any{
				"name":  model,
				"limit": map[string]any{"context": 200000, "output": 8192},
				"cost":  map[string]any{"input": OpenCodePrice[0], "output": OpenCodePrice[1]},
			}},
		}},
	}
	if permission != nil {
		cfg["permission"] = permission
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("fakemodel: encode the OpenCode config: %v", err)) // only our own maps are encoded
	}
	return string(b) + "\n"
}

// OpenCodeOffline is the environment ("KEY=value" entries) that keeps
// OpenCode 1.18 from reaching the internet at start: without it, it
// fetches the models.dev catalogue (models.opencode.ai) and installs its
// plugin package (@opencode-ai/plugin) from the npm registry into each of
// its config folders. The npm install goes through npm's own settings, so
// npm_config_offline answers it from the (empty) cache instead. The
// update check is off in OpenCodeConfig too; LSP servers are never
// downloaded.
func OpenCodeOffline() []string {
	return []string{
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"npm_config_offline=true",
	}
}
