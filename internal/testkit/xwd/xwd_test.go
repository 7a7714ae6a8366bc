package xwd

import (
	"encoding/binary"
	"image/color"
	"strings"
	"testing"
)

// encode writes a 32-bit TrueColor ZPixmap as Xvfb does (LSB first), with
// a window name and two colormap entries to skip.
func encode(w, h int, px func(x, y int) uint32, order uint32) []byte {
	name := "Xvfb main window\x00"
	hdr := header{HeaderSize: uint32(headerLen + len(name)), FileVersion: 7, PixmapFormat: 2, PixmapDepth: 24,
		PixmapWidth: uint32(w), PixmapHeight: uint32(h), ByteOrder: order, BitmapUnit: 32, BitmapPad: 32,
		BitsPerPixel: 32, BytesPerLine: uint32(w*4 + 8), VisualClass: 4, RedMask: 0xff0000, GreenMask: 0xff00,
		BlueMask: 0xff, BitsPerRGB: 8, ColormapEntries: 256, NColors: 2, WindowWidth: uint32(w), WindowHeight: uint32(h)}
	b, _ := binary.Append(nil, binary.BigEndian, hdr)
	b = append(b, name...)
	b = append(b, make([]byte, 2*colorLen)...)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			if order == lsbFirst {
				b = binary.LittleEndian.AppendUint32(b, px(x, y))
			} else {
				b = binary.BigEndian.AppendUint32(b, px(x, y))
			}
		}
		b = append(b, make([]byte, 8)...)
	}
	return b
}

func TestDecode(t *testing.T) {
	for _, order := range []uint32{0, 1} {
		b := encode(3, 2, func(x, y int) uint32 { return uint32(x*0x40)<<16 | uint32(y*0x80)<<8 | 0x2e }, order)
		img, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := img.At(2, 1), (color.NRGBA{0x80, 0x80, 0x2e, 0xff}); got != want {
			t.Errorf("order %d: pixel (2,1) = %v, want %v", order, got, want)
		}
		if img.Bounds().Dx() != 3 || img.Bounds().Dy() != 2 {
			t.Errorf("bounds %v", img.Bounds())
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := encode(2, 2, func(x, y int) uint32 { return 0 }, 0)
	bad := func(off int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	for what, c := range map[string]struct {
		b    []byte
		want string
	}{
		"short":        {good[:10], "shorter than"},
		"version":      {bad(4, 6), "file version"},
		"format":       {bad(8, 1), "pixmap format"},
		"visual":       {bad(52, 3), "visual class"},
		"bpp":          {bad(44, 16), "bits per pixel"},
		"mask":         {bad(56, 0), "mask is zero"},
		"huge":         {bad(16, 1<<20), "pixels"},
		"line":         {bad(48, 4), "bytes per line"},
		"truncated":    {good[:len(good)-1], "the image needs"},
		"header size":  {bad(0, 3), "header size"},
		"many colours": {bad(76, 1<<30), "the image needs"},
	} {
		if _, err := Decode(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", what, err, c.want)
		}
	}
}

// FuzzDecode: any bytes decode or fail with an error, never a panic or
// an allocation beyond the limit.
func FuzzDecode(f *testing.F) {
	f.Add(encode(2, 2, func(x, y int) uint32 { return uint32(x + y) }, 0))
	f.Add(encode(1, 3, func(x, y int) uint32 { return 0xffffff }, 1))
	f.Add([]byte("not an image"))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := Decode(b)
		if err == nil && (img.Bounds().Dx() == 0 || img.Bounds().Dy() == 0) {
			t.Fatalf("an empty image without an error")
		}
	})
}
