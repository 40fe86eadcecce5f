package adapters

import (
	"strings"
	"testing"
)

func TestTailBuffer(t *testing.T) {
	tests := []struct {
		name   string
		size   int
		writes []string
		want   string
	}{
		{"empty", 8, nil, ""},
		{"under", 8, []string{"abc", "de"}, "abcde"},
		{"exact", 5, []string{"abc", "de"}, "abcde"},
		{"wraps", 5, []string{"abc", "def", "gh"}, "defgh"},
		{"one big write", 4, []string{"0123456789"}, "6789"},
		{"big then small", 4, []string{"0123456789", "ab"}, "89ab"},
		{"many small", 3, strings.Split("abcdefghij", ""), "hij"},
		{"zero size", 0, []string{"abc"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTailBuffer(tt.size)
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := string(b.Bytes()); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCappedBuffer(t *testing.T) {
	c := &cappedBuffer{max: 5}
	for _, w := range []string{"ab", "cdef", "ghi"} {
		if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if string(c.buf) != "abcde" || c.total != 9 || cap(c.buf) != 5 {
		t.Errorf("kept %q (cap %d) of %d bytes", c.buf, cap(c.buf), c.total)
	}
}
