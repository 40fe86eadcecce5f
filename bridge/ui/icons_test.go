package ui

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// drawIcon draws the app icon at size×size: a bridge (a deck on two
// pillars) in white on the theme color, inside the middle 60% so that a
// maskable crop keeps it whole.
func drawIcon(size int) *image.Paletted {
	bg := color.RGBA{0x1f, 0x29, 0x37, 0xff}
	img := image.NewPaletted(image.Rect(0, 0, size, size), color.Palette{bg, color.White})
	u := func(f float64) int { return int(f * float64(size)) }
	fill := func(x0, y0, x1, y1 float64) {
		for y := u(y0); y < u(y1); y++ {
			for x := u(x0); x < u(x1); x++ {
				img.SetColorIndex(x, y, 1)
			}
		}
	}
	fill(0.2, 0.4, 0.8, 0.48)   // the deck
	fill(0.3, 0.48, 0.38, 0.72) // the pillars
	fill(0.62, 0.48, 0.7, 0.72) //
	fill(0.2, 0.3, 0.24, 0.4)   // the rails' ends
	fill(0.76, 0.3, 0.8, 0.4)   //
	return img
}

// TestIcons checks that the app icons are the drawn ones, PNGs of their
// size; UPDATE_ICONS=1 draws them again.
func TestIcons(t *testing.T) {
	for _, size := range []int{192, 512} {
		var buf bytes.Buffer
		enc := png.Encoder{CompressionLevel: png.BestCompression}
		if err := enc.Encode(&buf, drawIcon(size)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("static", fmt.Sprintf("icon-%d.png", size))
		if os.Getenv("UPDATE_ICONS") != "" {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("%s is not the drawn icon; run UPDATE_ICONS=1 go test ./bridge/ui -run TestIcons", path)
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(got))
		if err != nil || cfg.Width != size || cfg.Height != size {
			t.Errorf("%s: %dx%d %v", path, cfg.Width, cfg.Height, err)
		}
	}
}
