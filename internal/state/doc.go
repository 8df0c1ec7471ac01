// Package state keeps wtx's records in an embedded SQLite database.
//
// # Vocabulary
//
// A [Workspace] is a directory wtx manages, named by its canonical path. A
// [Stage] is one transaction over a workspace; its State is "open" until it
// is applied or dropped. An [Op] is one applied batch (an apply or an undo)
// in the workspace's journal. A [Receipt] is the durable record of a run or
// an apply. Structured details (a stage's configuration, an op's or a
// receipt's body) are JSON documents the database stores without
// interpreting.
//
// # The database
//
// [Open] opens or creates the database file. It runs in WAL mode with
// synchronous=FULL, so a committed write survives power loss, and with
// foreign keys enforced. The schema is a numbered series of migrations
// embedded in the binary; Open applies those the file lacks, each in its own
// transaction, and records them in the schema_migrations table. The file
// carries wtx's SQLite application id: Open refuses a file that belongs to
// something else ([ErrForeign]) and one written by a newer wtx
// ([ErrTooNew]).
//
// # Concurrency
//
// Several processes may open the same file. Every write transaction begins
// IMMEDIATE, taking the database's write lock up front, and waits up to ten
// seconds for another writer to finish; readers never wait for writers.
// [DB.Tx] groups several writes into one transaction.
//
// Times are stored as RFC 3339 UTC text with nine fractional digits, so that
// text order is time order; they come back in UTC.
package state
