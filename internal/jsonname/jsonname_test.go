package jsonname

import (
	"errors"
	"testing"
)

func TestPairs(t *testing.T) {
	for _, name := range []string{"", "a.txt", "\xff", "x\xfey", "\xef\xbf\xbd", "tab\there", "\x1b[2K"} {
		got, err := Name(Text(name), B64(name))
		if err != nil || got != name {
			t.Errorf("%q: got %q, %v", name, got, err)
		}
	}
	if B64("\xef\xbf\xbd") != "" || Text("\xef\xbf\xbd") != "\uFFFD" {
		t.Error("a literal U+FFFD is an ordinary character")
	}
	if Text("a\xff") != `"a\377"` {
		t.Errorf("Text of invalid UTF-8: %s", Text("a\xff"))
	}
	list := []string{"a", "\xff"}
	got, err := Names(Texts(list), B64s(list))
	if err != nil || len(got) != 2 || got[1] != "\xff" {
		t.Errorf("list: %q %v", got, err)
	}
	if B64s([]string{"a", "b"}) != nil {
		t.Error("B64s of valid names must be nil")
	}
	if _, err := Names([]string{"a"}, []string{"YQ==", "Yg=="}); err == nil {
		t.Error("length mismatch accepted")
	}
}

func TestCheck(t *testing.T) {
	ok := []string{`{"path":"a"}`, `{"path":"\u00e9\ud83d\ude00"}`, "{\"path\":\"\xef\xbf\xbd\"}", `{"p":"\\ud800"}`, `{"p":"\"\u0041"}`}
	for _, s := range ok {
		if err := Check([]byte(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := []string{"{\"path\":\"\xff\"}", "{\"path\":\"a\xc3\"}", `{"path":"\ud800"}`, `{"path":"\udc00x"}`, `{"path":"\ud800\u0041"}`}
	for _, s := range bad {
		if err := Check([]byte(s)); !errors.Is(err, ErrInvalidUTF8) {
			t.Errorf("%q: %v", s, err)
		}
	}
}
