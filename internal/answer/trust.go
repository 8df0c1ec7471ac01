package answer

// TrustedKey is one key of the trust file.
type TrustedKey struct {
	KeyID     string `json:"key_id"`
	Name      string `json:"name"`
	PublicKey string `json:"public_key"` // PEM, as 'wtx receipt key' prints it
}

// TrustList answers receipt trust list: the trust file and its keys.
type TrustList struct {
	File string       `json:"file"`
	Keys []TrustedKey `json:"keys"`
	// OwnKeyID names the state root's own receipt key, trusted without a
	// line in the file ("" when it has none yet).
	OwnKeyID string `json:"own_key_id"`
}

// TrustChange answers receipt trust add and remove.
type TrustChange struct {
	File string `json:"file"`
	// Added (add) is false when the key was there already.
	Added   bool         `json:"added"`
	Keys    []TrustedKey `json:"keys"` // the key added, or the ones removed
	Removed bool         `json:"removed"`
}
