package receipt

import (
	"errors"
	"fmt"
)

// Classes of Error, for errors.Is.
var (
	// ErrInvalid: the document is not a valid receipt (every refusal of a
	// document is one).
	ErrInvalid = errors.New("receipt invalid")
	// ErrSignature: no signature of the envelope verifies with the key
	// (an ErrInvalid).
	ErrSignature = errors.New("receipt signature does not verify")
	// ErrUnsigned: the receipt is complete and its digest matches, but it
	// carries no signature, so it proves nothing (an ErrInvalid).
	ErrUnsigned = errors.New("receipt unsigned")
	// ErrKey: a public key that cannot be used, or none to check a
	// signature with.
	ErrKey = errors.New("receipt key unusable")
	// ErrNoKey: a signed document and no key to check it with (an ErrKey).
	ErrNoKey = errors.New("no receipt key")
)

// Error is a receipt refused, or a key that cannot be used.
type Error struct {
	// Check is the check that refused ("" when the document is not a
	// receipt document at all, or for a key).
	Check   Check
	Message string
	// Err is the cause, if any.
	Err   error
	class error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the error's classes and its cause.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.class != nil {
		errs = append(errs, e.class)
	}
	switch e.class {
	case ErrSignature, ErrUnsigned:
		errs = append(errs, ErrInvalid)
	case ErrNoKey:
		errs = append(errs, ErrKey)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// invalidf is a refusal of a document by check c.
func invalidf(c Check, format string, args ...any) *Error {
	return &Error{Check: c, Message: fmt.Sprintf(format, args...), class: ErrInvalid}
}
