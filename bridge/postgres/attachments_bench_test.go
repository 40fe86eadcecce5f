package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
)

// BenchmarkAttachments measures a 25 MiB attachment through real HTTP on
// 127.0.0.1, on SQLite and on PostgreSQL (durable, as
// BenchmarkAppendsPostgres): upload (new bytes every time, so that none is
// a copy already stored: spooled, hashed, sniffed, written in chunks) and
// download (streamed chunk by chunk). MB/s is the file's size over the
// request's time. During the uploads one client appends a message every
// 10 ms and their median, 99th percentile and longest times are reported
// (p50-, p99-, max-append-ms): on SQLite each chunk of an upload is a step
// of the one writer, which appends wait behind.
func BenchmarkAttachments(b *testing.B) {
	srv := pgtest.NewDurable()
	b.Cleanup(srv.Stop)
	const size = 25 << 20
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	stores := map[string]func(b *testing.B) bridge.Store{
		"sqlite": func(b *testing.B) bridge.Store {
			s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		},
		"postgres": func(b *testing.B) bridge.Store { return openStore(b, srv.Database(b), Options{}) },
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name+"/upload", func(b *testing.B) {
			c := client.New(benchServe(b, stores[name](b)))
			if _, err := c.CreateThread(context.Background(), agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
				b.Fatal(err)
			}
			stop := appendWhile(b, c)
			b.SetBytes(size)
			b.ResetTimer()
			for i := range b.N {
				binary.LittleEndian.PutUint64(data, uint64(i)+1<<40)
				if _, err := c.UploadAttachment(context.Background(), "t", "big.bin", bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stop()
		})
		b.Run(name+"/no-upload", func(b *testing.B) {
			// The appends' times with no upload going on, for comparison:
			// each iteration is a second of them.
			c := client.New(benchServe(b, stores[name](b)))
			if _, err := c.CreateThread(context.Background(), agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
				b.Fatal(err)
			}
			stop := appendWhile(b, c)
			for range b.N {
				time.Sleep(time.Second)
			}
			stop()
		})
		b.Run(name+"/download", func(b *testing.B) {
			url := benchServe(b, stores[name](b))
			c := client.New(url)
			if _, err := c.CreateThread(context.Background(), agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
				b.Fatal(err)
			}
			a, err := c.UploadAttachment(context.Background(), "t", "big.bin", bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				resp, err := http.Get(url + "/attachments/" + a.ID)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != size {
					b.Fatalf("downloaded %d bytes, %v", n, err)
				}
			}
		})
	}
}

// appendWhile appends a message every 10 ms until stop, which reports the
// appends' median, 99th percentile and longest time as b's metrics.
func appendWhile(b *testing.B, c *client.Client) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var times []time.Duration
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-t.C:
			}
			start := time.Now()
			in := agentbridge.EventInput{From: "user", Content: []byte(fmt.Sprintf("%q", fmt.Sprint("tick ", i)))}
			if _, err := c.Append(context.Background(), "t", in, ""); err != nil {
				b.Error(err)
				return
			}
			times = append(times, time.Since(start))
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if len(times) == 0 {
			return
		}
		slices.Sort(times)
		for _, m := range []struct {
			unit string
			d    time.Duration
		}{{"p50-append-ms", times[len(times)/2]}, {"p99-append-ms", times[len(times)*99/100]}, {"max-append-ms", times[len(times)-1]}} {
			b.ReportMetric(float64(m.d.Microseconds())/1000, m.unit)
		}
	}
}
