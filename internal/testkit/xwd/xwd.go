// Package xwd decodes X Window Dump images, the format Xvfb keeps its
// screen in with -fbdir (DIR/Xvfb_screen0): tests read the screen of a
// real X server without a screenshot tool. Only what Xvfb writes is
// supported: ZPixmap, TrueColor, 24 or 32 bits per pixel, either byte
// order. Test files only.
package xwd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"math/bits"
)

// header is the XWD file header (version 7): 25 big-endian 32-bit fields.
type header struct {
	HeaderSize, FileVersion, PixmapFormat, PixmapDepth, PixmapWidth, PixmapHeight, XOffset,
	ByteOrder, BitmapUnit, BitmapBitOrder, BitmapPad, BitsPerPixel, BytesPerLine, VisualClass,
	RedMask, GreenMask, BlueMask, BitsPerRGB, ColormapEntries, NColors,
	WindowWidth, WindowHeight, WindowX, WindowY, WindowBorderWidth uint32
}

const (
	headerLen  = 25 * 4
	colorLen   = 12 // an XWDColor: pixel, red, green, blue, flags, pad
	zPixmap    = 2
	trueColor  = 4
	maxPixels  = 1 << 26
	lsbFirst   = 0
	version    = 7
	maxHeaders = 1 << 20
)

// Decode reads an XWD image from b.
func Decode(b []byte) (image.Image, error) {
	if len(b) < headerLen {
		return nil, fmt.Errorf("xwd: %d bytes, shorter than the %d-byte header", len(b), headerLen)
	}
	var h header
	if _, err := binary.Decode(b[:headerLen], binary.BigEndian, &h); err != nil {
		return nil, fmt.Errorf("xwd: header: %w", err)
	}
	switch {
	case h.FileVersion != version:
		return nil, fmt.Errorf("xwd: offset 4: file version %d, want %d", h.FileVersion, version)
	case h.HeaderSize < headerLen || h.HeaderSize > maxHeaders:
		return nil, fmt.Errorf("xwd: offset 0: header size %d", h.HeaderSize)
	case h.PixmapFormat != zPixmap:
		return nil, fmt.Errorf("xwd: offset 8: pixmap format %d, only ZPixmap (2) is read", h.PixmapFormat)
	case h.VisualClass != trueColor:
		return nil, fmt.Errorf("xwd: offset 52: visual class %d, only TrueColor (4) is read", h.VisualClass)
	case h.BitsPerPixel != 24 && h.BitsPerPixel != 32:
		return nil, fmt.Errorf("xwd: offset 44: %d bits per pixel, want 24 or 32", h.BitsPerPixel)
	case h.RedMask == 0 || h.GreenMask == 0 || h.BlueMask == 0:
		return nil, errors.New("xwd: offset 56: a colour mask is zero")
	case h.PixmapWidth == 0 || h.PixmapHeight == 0 || uint64(h.PixmapWidth)*uint64(h.PixmapHeight) > maxPixels:
		return nil, fmt.Errorf("xwd: offset 16: %dx%d pixels", h.PixmapWidth, h.PixmapHeight)
	case uint64(h.BytesPerLine) < uint64(h.PixmapWidth)*uint64(h.BitsPerPixel/8):
		return nil, fmt.Errorf("xwd: offset 48: %d bytes per line for %d pixels of %d bits", h.BytesPerLine, h.PixmapWidth, h.BitsPerPixel)
	}
	start := uint64(h.HeaderSize) + uint64(h.NColors)*colorLen
	need := start + uint64(h.BytesPerLine)*uint64(h.PixmapHeight)
	if need > uint64(len(b)) {
		return nil, fmt.Errorf("xwd: %d bytes, the image needs %d", len(b), need)
	}
	w, ht := int(h.PixmapWidth), int(h.PixmapHeight)
	img := image.NewNRGBA(image.Rect(0, 0, w, ht))
	bpp := int(h.BitsPerPixel / 8)
	for y := 0; y < ht; y++ {
		row := b[start+uint64(y)*uint64(h.BytesPerLine):]
		for x := 0; x < w; x++ {
			p := row[x*bpp : x*bpp+bpp]
			var v uint32
			if h.ByteOrder == lsbFirst {
				for i := bpp - 1; i >= 0; i-- {
					v = v<<8 | uint32(p[i])
				}
			} else {
				for i := 0; i < bpp; i++ {
					v = v<<8 | uint32(p[i])
				}
			}
			img.SetNRGBA(x, y, color.NRGBA{channel(v, h.RedMask), channel(v, h.GreenMask), channel(v, h.BlueMask), 0xff})
		}
	}
	return img, nil
}

// channel extracts a colour channel by its mask, scaled to 8 bits.
func channel(v, mask uint32) uint8 {
	shift := bits.TrailingZeros32(mask)
	width := bits.OnesCount32(mask)
	c := (v & mask) >> shift
	switch {
	case width >= 8:
		return uint8(c >> (width - 8))
	default:
		return uint8(c << (8 - width))
	}
}
