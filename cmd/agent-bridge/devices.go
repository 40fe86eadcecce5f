package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/mdp/qrterminal/v3"
	"github.com/spf13/cobra"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// pairCommand prints a one-time link that pairs a phone (valid 10 minutes,
// usable once) and its QR code, drawn with half blocks so that it fits a
// terminal and needs no escape sequences.
func (m *Main) pairCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	name := fs.String("name", "phone", "the device's name, as agent-bridge devices lists it")
	noQR := fs.Bool("no-qr", false, "print the link only")
	base := fs.String("base", "", "the address the phone reaches the bridge at, such as https://laptop.tailnet-name.ts.net (default: the bridge config's notify.public_url, else the bridge's own)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("pair takes no arguments, got %q (name the device with --name)", pos[0])
		}
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		if *base != "" {
			if u, err := url.Parse(*base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--base: %q is not an http(s) URL", *base)
			}
		}
		link, err := cl.Pair(ctx, *name)
		if err != nil {
			return err
		}
		if *base != "" {
			link.URL = strings.TrimRight(*base, "/") + "/ui/#pair=" + link.Code
		}
		if cf.json {
			return m.printJSON(link)
		}
		if !*noQR {
			printQR(m.Stdout, link.URL)
		}
		if _, err := fmt.Fprintf(m.Stdout, "Open this on %s within 10 minutes (it works once):\n%s\n", link.Name, link.URL); err != nil {
			return err
		}
		if u, err := url.Parse(link.URL); err == nil && (u.Hostname() == "localhost" || net.ParseIP(u.Hostname()).IsLoopback()) {
			_, err = fmt.Fprintln(m.Stderr, "note: this address is this machine's own; give --base (or notify.public_url in the bridge config) the address the phone reaches, such as your tailscale serve name")
			return err
		}
		return nil
	}
}

// printQR draws link as a QR code in half blocks: plain Unicode that
// survives the CLI's output writer and fits an 80-column terminal.
func printQR(w io.Writer, link string) {
	qrterminal.GenerateWithConfig(link, qrterminal.Config{Level: qrterminal.L, Writer: w, HalfBlocks: true, QuietZone: 2})
}

// devicesCommand lists the paired devices and the browsers subscribed to
// push, with their notifications and last delivery, and with --deliveries
// each one's kept deliveries (contract 8.4).
func (m *Main) devicesCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	deliveries := fs.Bool("deliveries", false, "also list each device's pushes the bridge keeps (the last 100), newest first: when, outcome (sent, expired, failed: STATUS), what, and how long it took")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("devices takes no arguments, got %q", pos[0])
		}
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		list, err := cl.Devices(ctx)
		if err != nil {
			return err
		}
		if cf.json {
			return m.printJSON(list)
		}
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tLAST SEEN\tNOTIFICATIONS\tLAST PUSH")
		for _, d := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", orDash(d.ID), d.Name, orDash(d.LastSeen), notifications(d), lastPush(d))
		}
		if err := tw.Flush(); err != nil || !*deliveries {
			return err
		}
		return m.printDeliveries(list)
	}
}

// printDeliveries prints each device's kept pushes under its name.
func (m *Main) printDeliveries(list []agentbridge.Device) error {
	for _, d := range list {
		if len(d.Deliveries) == 0 {
			continue
		}
		fmt.Fprintf(m.Stdout, "\n%s: the last %d pushes\n", d.Name, len(d.Deliveries))
		tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  AT\tOUTCOME\tWHAT\tTHREAD\tEVENT\tTOOK")
		for _, p := range d.Deliveries {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d ms\n", p.At, p.Outcome, p.Category, p.Thread, p.Event, p.LatencyMS)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// devicesRevokeCommand ends a paired device's access.
func (m *Main) devicesRevokeCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	cf := m.addClientFlags(fs)
	return func(ctx context.Context, pos []string) error {
		if len(pos) != 1 {
			return usagef("devices revoke: give the device's ID (agent-bridge devices lists them)")
		}
		cl, err := m.newClient(cf)
		if err != nil {
			return err
		}
		d, err := cl.RevokeDevice(ctx, pos[0])
		if err != nil {
			return err
		}
		if cf.json {
			return m.printJSON(d)
		}
		_, err = fmt.Fprintf(m.Stdout, "revoked %s (%s)\n", d.ID, d.Name)
		return err
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// notifications says whether a device gets pushes, and of what.
func notifications(d agentbridge.Device) string {
	switch {
	case d.RevokedAt != "":
		return "revoked " + d.RevokedAt
	case !d.Notifications || d.Categories == nil:
		return "off"
	}
	c, s := d.Categories, ""
	for _, on := range []struct {
		name string
		on   bool
	}{{"permission", c.Permission}, {"question", c.Question}, {"failed", c.Failed}} {
		if on.on {
			s += on.name + ","
		}
	}
	if len(c.Threads) > 0 {
		s += fmt.Sprintf("replies in %d threads,", len(c.Threads))
	}
	if s == "" {
		return "on (nothing chosen)"
	}
	return s[:len(s)-1]
}

// lastPush is a device's last delivery outcome and its time.
func lastPush(d agentbridge.Device) string {
	if d.LastOutcome == "" {
		return "-"
	}
	return d.LastOutcome + " " + d.LastAt
}
