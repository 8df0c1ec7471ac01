package wtx

import "encoding/json"

// decodable says which types decode their names back.
func decodable(v any) bool {
	switch v.(type) {
	case Side, Change, Conflict, Repair, TxFile, TxOp, stageConfig:
		return true
	}
	return false
}

func wireDecode(data []byte, out any) error { return json.Unmarshal(data, out) }
