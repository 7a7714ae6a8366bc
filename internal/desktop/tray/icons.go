package tray

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"sync"
)

// iconSize is the icons' width and height in pixels (hosts scale them).
const iconSize = 32

// iconColors are the three states' colours: grey, green, orange.
var iconColors = map[Icon]color.NRGBA{
	IconIdle:    {0x80, 0x88, 0x90, 0xff},
	IconUp:      {0x2e, 0x9d, 0x4f, 0xff},
	IconTrouble: {0xe6, 0x7e, 0x22, 0xff},
}

var (
	iconOnce sync.Once
	iconPNG  map[Icon][]byte // written once by iconOnce
)

// IconPNG returns the PNG of icon i: a disc in the state's colour crossed
// by two white lanes (with a gap in them when nothing is up).
func IconPNG(i Icon) []byte {
	iconOnce.Do(func() {
		iconPNG = map[Icon][]byte{}
		for ic := range iconColors {
			iconPNG[ic] = drawIcon(ic)
		}
	})
	return iconPNG[i]
}

func drawIcon(i Icon) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, iconSize, iconSize))
	c := iconColors[i]
	const r = iconSize/2 - 1
	mid := float64(iconSize) / 2
	for y := 0; y < iconSize; y++ {
		for x := 0; x < iconSize; x++ {
			fx, fy := float64(x)+0.5, float64(y)+0.5
			d := math.Hypot(fx-mid, fy-mid)
			cov := math.Max(0, math.Min(1, float64(r)+0.5-d)) // anti-aliased edge
			if cov == 0 {
				continue
			}
			px := c
			// Two white lanes across the disc.
			lane := (fy >= mid-7 && fy < mid-3) || (fy >= mid+3 && fy < mid+7)
			inLane := fx > mid-10 && fx < mid+10
			gap := i == IconIdle && fx > mid-2 && fx < mid+2
			if lane && inLane && !gap {
				px = color.NRGBA{0xff, 0xff, 0xff, 0xff}
			}
			px.A = uint8(cov * 255)
			img.SetNRGBA(x, y, px)
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img) // cannot fail on an in-memory image
	return b.Bytes()
}
