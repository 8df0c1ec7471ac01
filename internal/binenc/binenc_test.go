package binenc

import (
	"encoding/binary"
	"testing"
)

func TestRoundTripAndFirstError(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -7)
	b = append(b, 9)
	b = AppendString(b, "päth/with\x00bytes")
	d := NewDecoder(b)
	if got := d.Uvarint(); got != 300 {
		t.Fatalf("Uvarint = %d", got)
	}
	if got := d.Varint(); got != -7 {
		t.Fatalf("Varint = %d", got)
	}
	if got := d.Byte(); got != 9 {
		t.Fatalf("Byte = %d", got)
	}
	if got := d.String(); got != "päth/with\x00bytes" {
		t.Fatalf("String = %q", got)
	}
	if d.Err() != nil || d.Len() != 0 {
		t.Fatalf("err %v, %d bytes left", d.Err(), d.Len())
	}
	// Reading past the end sets the error once and yields zero values.
	if d.Byte() != 0 || d.Err() == nil {
		t.Fatal("reading past the end did not fail")
	}
	first := d.Err()
	d.Fail(nil)
	if d.String() != "" || d.Uvarint() != 0 || d.Err() != first {
		t.Fatal("the first error was not kept")
	}
}

func TestStringLongerThanData(t *testing.T) {
	b := binary.AppendUvarint(nil, 10)
	b = append(b, "short"...)
	d := NewDecoder(b)
	if s := d.String(); s != "" || d.Err() == nil {
		t.Fatalf("String = %q, err %v; want an error", s, d.Err())
	}
}
