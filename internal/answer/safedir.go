package answer

import "github.com/wtx-dev/wtx/internal/jsonname"

// SafeDirectories answers safe-directory add, remove and list: the
// directories whose workspace boundary and project file are trusted
// whoever owns them. A name that is not UTF-8 is given quoted, with its
// bytes in the _b64 field beside it.
type SafeDirectories struct {
	// File is where the list is kept; Entries its entries after the
	// command, Env those of WTX_SAFE_DIRECTORIES.
	File       string   `json:"file"`
	FileB64    string   `json:"file_b64,omitempty"`
	Entries    []string `json:"entries"`
	EntriesB64 []string `json:"entries_b64,omitempty"`
	Env        []string `json:"env"`
	EnvB64     []string `json:"env_b64,omitempty"`
	// Entry is the directory added or removed, as kept; Already is set
	// when add found it there.
	Entry    string `json:"entry,omitempty"`
	EntryB64 string `json:"entry_b64,omitempty"`
	Already  bool   `json:"already,omitempty"`
}

// NewSafeDirectories makes the answer from the names as they are.
func NewSafeDirectories(file string, entries, env []string, entry string, already bool) SafeDirectories {
	return SafeDirectories{File: jsonname.Text(file), FileB64: jsonname.B64(file),
		Entries: OrEmpty(jsonname.Texts(entries)), EntriesB64: jsonname.B64s(entries),
		Env: OrEmpty(jsonname.Texts(env)), EnvB64: jsonname.B64s(env),
		Entry: jsonname.Text(entry), EntryB64: jsonname.B64(entry), Already: already}
}
