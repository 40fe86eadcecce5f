package service

import (
	"bytes"
	"encoding/xml"
	"strings"
	"text/template"
)

// Render returns the service definition for d with o: a launchd plist when
// o.GOOS is darwin, a systemd unit otherwise. It is pure, and it is the single
// source of both what "service install" writes and the example files.
func Render(d Daemon, o Options) string {
	data := renderData{
		Daemon:      string(d),
		Name:        Name(d, o.goos()),
		Description: description(d),
		Binary:      o.Binary,
		Args:        append([]string{string(d)}, o.Args...),
		Path:        o.Path,
		DataDir:     o.DataDir,
		LogFile:     LogFile(d, o),
		User:        userName(o),
		System:      o.System,
		Reload:      d == Coordinator,
	}
	t := unitTemplate
	if o.goos() == "darwin" {
		t = plistTemplate
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		// The templates are constants executed on plain strings: an error
		// here is a programming mistake caught by the tests.
		panic("launchd: render " + string(d) + ": " + err.Error())
	}
	return b.String()
}

type renderData struct {
	Daemon, Name, Description string
	Binary                    string
	Args                      []string
	Path, DataDir, LogFile    string
	User                      string
	System                    bool
	Reload                    bool // SIGHUP re-reads the config
}

var funcs = template.FuncMap{
	"xml":      xmlEscape,
	"unit":     unitEscape,
	"execLine": execLine,
}

var unitTemplate = template.Must(template.New("unit").Funcs(funcs).Parse(`# {{.Name}}: written by "agent-bridge service install {{.Daemon}}".
# Re-run that command to change it (it replaces this file).
[Unit]
Description={{.Description}}
Documentation=https://github.com/agent-bridge/agent-bridge/blob/main/docs/operations.md
{{- if .System}}
After=network-online.target
Wants=network-online.target
{{- end}}

[Service]
Type=simple
ExecStart={{execLine .Binary .Args}}
WorkingDirectory={{unit .DataDir}}
Environment={{execLine "" (printf "PATH=%s" .Path)}}
{{- if .User}}
User={{unit .User}}
{{- end}}
{{- if .Reload}}
ExecReload=/bin/kill -HUP $MAINPID
{{- end}}
Restart=on-failure
RestartSec=5
TimeoutStopSec=30
StandardOutput=append:{{unit .LogFile}}
StandardError=append:{{unit .LogFile}}

[Install]
WantedBy={{if .System}}multi-user.target{{else}}default.target{{end}}
`))

var plistTemplate = template.Must(template.New("plist").Funcs(funcs).Parse(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- {{.Name}}: written by "agent-bridge service install {{.Daemon}}". Re-run that command to change it. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>{{xml .Name}}</string>
	<key>ProgramArguments</key>
	<array>
		<string>{{xml .Binary}}</string>
{{- range .Args}}
		<string>{{xml .}}</string>
{{- end}}
	</array>
	<key>EnvironmentVariables</key>
	<dict>
		<key>PATH</key>
		<string>{{xml .Path}}</string>
	</dict>
	<key>WorkingDirectory</key>
	<string>{{xml .DataDir}}</string>
{{- if .User}}
	<key>UserName</key>
	<string>{{xml .User}}</string>
{{- end}}
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ThrottleInterval</key>
	<integer>5</integer>
	<key>ExitTimeOut</key>
	<integer>30</integer>
	<key>StandardOutPath</key>
	<string>{{xml .LogFile}}</string>
	<key>StandardErrorPath</key>
	<string>{{xml .LogFile}}</string>
</dict>
</plist>
`))

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}

// unitEscape escapes systemd's specifier character in a value that is taken
// whole (a path): "%" starts a specifier such as %h.
func unitEscape(s string) string {
	return strings.ReplaceAll(s, "%", "%%")
}

// execLine renders a command line (or, with an empty binary, a single
// Environment= assignment) in systemd's syntax: each word quoted when it holds
// a blank, quote or backslash, with "%" and "$" escaped so that systemd
// expands neither specifiers nor variables.
func execLine(binary string, args ...any) string {
	var words []string
	if binary != "" {
		words = append(words, binary)
	}
	for _, a := range args {
		switch v := a.(type) {
		case string:
			words = append(words, v)
		case []string:
			words = append(words, v...)
		}
	}
	for i, w := range words {
		w = strings.ReplaceAll(w, "%", "%%")
		if binary != "" {
			w = strings.ReplaceAll(w, "$", "$$")
		}
		if w == "" || strings.ContainsAny(w, " \t\"'\\;") {
			w = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
		}
		words[i] = w
	}
	return strings.Join(words, " ")
}
