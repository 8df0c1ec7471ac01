package stage

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestOverlayConfigKeepsNameBytes(t *testing.T) {
	c := overlayConfig{Workspace: "/w/\xff", UserXattr: true, Exclude: []string{"*.key", "a\xfe"}, Share: []string{"s"},
		ShareAt: []string{"s\xff"}, HideDirs: []string{"d\xff"}, HideFiles: []string{"f\xff", "\uFFFD"}}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got overlayConfig
	if err := json.Unmarshal(data, &got); err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip through %s: %+v, %v", data, got, err)
	}
	var old overlayConfig
	if err := json.Unmarshal([]byte(`{"workspace":"/w","userxattr":false,"exclude":["x"]}`), &old); err != nil || old.Workspace != "/w" || old.Exclude[0] != "x" {
		t.Fatalf("old file: %+v %v", old, err)
	}
}

// A field added to overlayConfig must be added to its JSON twin too.
func TestOverlayConfigTwinHasEveryField(t *testing.T) {
	twin := map[string]bool{}
	tt := reflect.TypeOf(overlayConfigJSON{})
	for i := 0; i < tt.NumField(); i++ {
		twin[tt.Field(i).Tag.Get("json")] = true
	}
	ty := reflect.TypeOf(overlayConfig{})
	for i := 0; i < ty.NumField(); i++ {
		if tag := ty.Field(i).Tag.Get("json"); !twin[tag] {
			t.Errorf("overlayConfig.%s (%q) is missing from overlayConfigJSON", ty.Field(i).Name, tag)
		}
	}
}
