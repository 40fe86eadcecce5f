package uitest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// BenchmarkLiveBurst posts b.N messages from four writers as fast as the
// bridge takes them, with the thread open, and waits until the page has
// rendered every one: the cost per event of stream delivery plus
// incremental rendering.
func BenchmarkLiveBurst(b *testing.B) {
	s := newStack(b)
	s.startServe()
	th := s.newThread("burst")
	br := newBrowser(b)
	br.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	br.waitJS("live", `document.querySelector("#conn-status").textContent === "live"`)
	b.ResetTimer()
	var wg sync.WaitGroup
	const writers = 4
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += writers {
				s.post(th, map[string]any{"from": "user", "content": fmt.Sprintf("burst %d", i)})
			}
		}()
	}
	wg.Wait()
	br.waitJS("every event rendered", fmt.Sprintf(`document.querySelectorAll("#event-list .event").length === %d`, b.N+1))
}

// BenchmarkOpenLongThread opens a 5,000-event thread: the time until the
// newest event is on screen, which the tail-first load keeps independent of
// the thread's length.
func BenchmarkOpenLongThread(b *testing.B) {
	s := newStack(b)
	s.startServe()
	th := s.newThread("long")
	const n = 5000
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				s.post(th, map[string]any{"from": "user", "content": fmt.Sprintf("message %d", i)})
			}
		}()
	}
	wg.Wait()
	br := newBrowser(b)
	b.ResetTimer()
	for range b.N {
		br.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
		br.waitJS("the newest event", fmt.Sprintf(`document.querySelector('#event-list .event[data-seq="%d"]')`, n+1))
	}
}
