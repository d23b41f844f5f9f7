// Package dbcmd implements the database commands of the bbolt backend:
// "leasehold backup", "leasehold restore" and "leasehold compact". They
// work on the database file in the server's data directory
// (<data-dir>/leasehold.db) through storage/boltdb's offline operations,
// which refuse a file a running server holds.
//
// A backup while the server runs has to go through the server's HTTP API,
// which the storage layer must not know; main therefore hands
// BackupCommand a RemoteBackup function from the client code.
package dbcmd
