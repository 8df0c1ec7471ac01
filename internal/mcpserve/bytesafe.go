package mcpserve

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/jsonname"
)

// checkText refuses JSON text whose strings cannot carry what was meant:
// raw bytes that are not UTF-8, or an escaped UTF-16 surrogate that is not
// part of a pair. Decoding would silently put U+FFFD in their place. A
// literal U+FFFD is an ordinary character and passes.
func checkText(raw []byte) error {
	if err := jsonname.Check(raw); err != nil {
		return notText("the arguments cannot carry their bytes (" + err.Error() + ")")
	}
	return nil
}

func notText(what string) error {
	return &wtx.Error{Code: wtx.CodeUsage, Message: what +
		"; send names and contents that are not UTF-8 base64-encoded in path_b64, content_b64, old_b64 or new_b64"}
}

// pick returns the text field or the bytes of its base64 twin; giving both
// is a usage error.
func pick(name, text, b64 string) (string, bool, error) {
	if b64 == "" {
		return text, text != "", nil
	}
	if text != "" {
		return "", false, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("give %s or %s_b64, not both", name, name)}
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", false, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("%s_b64 is not standard padded base64: %v", name, err)}
	}
	return string(b), true, nil
}

// selectors is a list of selectors from its text or its base64 form.
func selectors(field string, texts, b64s []string) ([]string, error) {
	if len(b64s) == 0 {
		return texts, nil
	}
	if len(texts) > 0 {
		return nil, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("give %s or %s_b64, not both", field, field)}
	}
	out, err := jsonname.Names(nil, b64s)
	if err != nil {
		return nil, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("%s_b64: %v", field, err)}
	}
	return out, nil
}

// needPath is the path of a per-file call, from path or path_b64.
func needPath(text, b64 string) (string, error) {
	p, ok, err := pick("path", text, b64)
	if err == nil && !ok {
		err = &wtx.Error{Code: wtx.CodeUsage, Message: "path (or path_b64) is required"}
	}
	return p, err
}

// textOr puts s in text when it is UTF-8 and in base64 otherwise.
func textOr(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return "", base64.StdEncoding.EncodeToString([]byte(s))
}
