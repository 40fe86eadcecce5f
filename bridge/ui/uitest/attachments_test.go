package uitest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestAttachFromPhone, at 390×844 on a touch screen: an image picked with
// the attach button's file input uploads at once, waits as a chip, and
// once sent shows inline in the thread, decoded, inside the window; a file
// dropped onto the thread and an image pasted into the text box are sent
// the same way (the text file as a chip that downloads it). The attach
// button and the chips are 44 px tap targets with 16 px text, and the
// message names the files with the types the bridge sniffed.
func TestAttachFromPhone(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startServe()
	th := s.newThread("photos")
	b := newBrowser(t)
	b.resize(phone)
	b.run("open the thread", chromedp.Navigate(s.url+"/ui/threads/"+th))
	b.waitJS("the thread", `document.querySelector("#thread-title").textContent === "photos"`)

	img := image.NewRGBA(image.Rect(0, 0, 1200, 800))
	for y := range 800 {
		for x := range 1200 {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "shot.png")
	if err := os.WriteFile(shot, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	b.run("pick the photo", chromedp.SetUploadFiles(chromedp.CSS("#attach-input"), []string{shot}))
	b.waitJS("the photo to be uploaded", `Array.from(document.querySelectorAll("#attach-list .attach-chip")).some(c => !c.classList.contains("uploading") && c.textContent.startsWith("shot.png · "))`)
	for _, sel := range []string{"#attach-btn", "#attach-list .attach-chip", "#attach-list .attach-remove"} {
		if w, h := eval[float64](b, box(sel, "width")), eval[float64](b, box(sel, "height")); w < 44 || h < 44 {
			t.Errorf("%s is %.0f × %.0f px, want a 44 px tap target", sel, w, h)
		}
	}
	if fs := eval[string](b, `getComputedStyle(document.querySelector("#attach-list .attach-chip")).fontSize`); fs != "16px" {
		t.Errorf("the chip's text is %s, want 16px", fs)
	}
	b.setValue("#message-input", "see this")
	b.pressEnter("#message-input", false)
	image := `document.querySelector("#event-list .event .attachments .attachment-image img")`
	b.waitJS("the photo inline in the thread", image+` && `+image+`.complete && `+image+`.naturalWidth === 1200`)
	if alt := eval[string](b, image+`.alt`); alt != "shot.png" {
		t.Errorf("the image's alt = %q, want its name", alt)
	}
	if !eval[bool](b, inWindow("#event-list .event .attachments .attachment-image img")) {
		t.Error("the photo does not fit the phone's window")
	}
	if n := eval[int](b, `document.querySelectorAll("#attach-list .attach-chip").length`); n != 0 {
		t.Errorf("%d chips still wait after the message was sent", n)
	}

	// Dropped onto the thread, pasted into the text box.
	eval[bool](b, `(() => { const dt = new DataTransfer(); dt.items.add(new File(["line one\nline two\n"], "app.log", {type: "text/plain"}));
		document.querySelector("#events-wrap").dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true})); return true })()`)
	b.waitJS("the dropped file to be uploaded", `Array.from(document.querySelectorAll("#attach-list .attach-chip")).some(c => c.textContent.startsWith("app.log · "))`)
	eval[bool](b, `(() => { const bin = atob(`+jsString(encodePNG(t))+`); const bytes = Uint8Array.from(bin, c => c.charCodeAt(0));
		const dt = new DataTransfer(); dt.items.add(new File([bytes], "", {type: "image/png"}));
		document.querySelector("#message-input").dispatchEvent(new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true})); return true })()`)
	b.waitJS("the pasted image to be uploaded", `Array.from(document.querySelectorAll("#attach-list .attach-chip")).some(c => !c.classList.contains("uploading") && c.textContent.startsWith("pasted.png · "))`)
	b.setValue("#message-input", "")
	b.click("send", "#send-btn")
	chip := `document.querySelector("#event-list .event:last-child .attachments .file-chip")`
	b.waitJS("the log as a chip", chip+` && `+chip+`.textContent.startsWith("app.log")`)
	if h := eval[float64](b, box("#event-list .event:last-child .file-chip", "height")); h < 44 {
		t.Errorf("the file chip is %.0f px high, want 44", h)
	}
	if dl := eval[string](b, chip+`.getAttribute("download")`); dl != "app.log" {
		t.Errorf("the chip downloads as %q, want app.log", dl)
	}
	b.waitJS("the pasted image inline", `document.querySelectorAll("#event-list .event:last-child .attachment-image img").length === 1`)
	if got := b.text("#event-list .event:last-child .event-body"); got != "app.log, pasted.png" {
		t.Errorf("a message of files only reads %q, want their names", got)
	}

	var page struct {
		Events []struct {
			Meta struct {
				Attachments []struct{ Name, Type string } `json:"attachments"`
			} `json:"meta"`
		} `json:"events"`
	}
	s.mustAPI(http.MethodGet, "/threads/"+th+"/events?tail=2", nil, &page)
	got, _ := json.Marshal(page.Events)
	want := `[{"meta":{"attachments":[{"Name":"shot.png","Type":"image/png"}]}},{"meta":{"attachments":[{"Name":"app.log","Type":"text/plain; charset=utf-8"},{"Name":"pasted.png","Type":"image/png"}]}}]`
	if string(got) != want {
		t.Errorf("the messages name %s, want %s", got, want)
	}
	b.docShot("ui-phone-attachments.png")
}

// box is a JS expression: a dimension of the first element matching sel.
func box(sel, dim string) string {
	return `document.querySelector(` + jsString(sel) + `).getBoundingClientRect().` + dim
}

// encodePNG is a small PNG, base64.
func encodePNG(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}
