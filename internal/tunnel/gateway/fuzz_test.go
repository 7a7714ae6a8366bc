package gateway

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary documents to Parse: it must never panic or
// hang, must either accept or give a located ErrorList, and whatever it
// accepts must convert to a wg-quick configuration that parses back.
func FuzzParse(f *testing.F) {
	f.Add(good)
	f.Add("[interface]\nprivate_key = \"" + testPriv + "\"\nsite = [{name=\"a\", public_key=\"" + keyB + "\", networks=[\"10.0.0.0/8\"]}]\n")
	f.Add("site = [\n{ name = 'x',\n networks = [ \"::/0\" ] },\n]\n[interface]\nmtu='auto'\n")
	f.Add("[[site]]\n\"na\\u006de\" = \"\"\"multi\nline\"\"\"\n[site.sub]\nx = 1979-05-27T07:32:00Z\n")
	f.Add("a.b.c = [[1,2],[3,[4]]] # c\n[[x.y]]\n[[x.y]]\nz = {q = {r = 1}}\n")
	f.Add("[interface]\nprivate_key = yAnz5TF+lXXJte14tji3zlMNq\n")
	f.Add(fleetFile)
	f.Add("[fleet]\nendpoints = [\"https://h:1\"]\nnetworks = [\"::/0\"]\nprefix = \"/a\"\n[interface]\nprivate_key = \"" + testPriv + "\"\n")
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 1<<14 {
			return
		}
		scanPositions(src) // on any input, not only on valid TOML
		g, err := Parse("f.toml", []byte(src))
		if err != nil {
			list, ok := err.(ErrorList)
			if !ok || len(list) == 0 {
				t.Fatalf("error %T %v, want a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if !strings.HasPrefix(e.Error(), "f.toml:") {
					t.Fatalf("error without the file name: %q", e.Error())
				}
			}
			return
		}
		if g.Name == "" || len(g.Sites) == 0 && g.Fleet == nil {
			t.Fatalf("accepted a gateway without name or sites: %+v", g)
		}
		checkRoundTrip(t, g)
	})
}
