package receipt

import (
	"reflect"
	"strings"
	"testing"
)

// Receipt encodes itself byte-safely through a JSON twin: a field added to
// Receipt but not to the twin would vanish from every receipt. Every JSON
// field of Receipt must be in its twin.
func TestByteSafeTwinsHaveEveryField(t *testing.T) {
	for _, p := range []struct{ typ, twin any }{{Receipt{}, receiptJSON{}}} {
		twin := map[string]bool{}
		tt := reflect.TypeOf(p.twin)
		for i := 0; i < tt.NumField(); i++ {
			twin[jsonName(tt.Field(i))] = true
		}
		ty := reflect.TypeOf(p.typ)
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			if n := jsonName(f); f.IsExported() && n != "-" && !twin[n] {
				t.Errorf("%s.%s (%q) is missing from %s", ty.Name(), f.Name, n, tt.Name())
			}
		}
	}
}

func jsonName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "" {
		return f.Name
	}
	return tag
}
