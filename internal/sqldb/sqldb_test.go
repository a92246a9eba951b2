package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/sagebox/sagebox/internal/sqldb"
)

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "x.db")
	v1 := fstest.MapFS{"0001_a.sql": {Data: []byte("CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);")}}
	v2 := fstest.MapFS{
		"0001_a.sql": v1["0001_a.sql"],
		"0002_b.sql": {Data: []byte("INSERT INTO a VALUES (2);")},
	}
	for _, fsys := range []fstest.MapFS{v1, v1, v2, v2} {
		db, err := sqldb.Open(ctx, path, sqldb.Options{Migrations: fsys})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sqldb.Open(ctx, path, sqldb.Options{Synchronous: sqldb.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, versions int
	if err := db.R.QueryRowContext(ctx, "SELECT COUNT(*) FROM a").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := db.R.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations").Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if rows != 2 || versions != 2 {
		t.Errorf("rows %d, versions %d; want each migration applied once (2, 2)", rows, versions)
	}
	if _, err := db.R.ExecContext(ctx, "INSERT INTO a VALUES (3)"); err == nil {
		t.Error("the read pool accepted a write")
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tests := map[string]struct {
		path string
		fsys fstest.MapFS
	}{
		"query in path":      {filepath.Join(dir, "a?b.db"), nil},
		"bad migration name": {filepath.Join(dir, "b.db"), fstest.MapFS{"init.sql": {Data: []byte("SELECT 1;")}}},
		"duplicate version":  {filepath.Join(dir, "c.db"), fstest.MapFS{"1_a.sql": {Data: []byte("SELECT 1;")}, "0001_b.sql": {Data: []byte("SELECT 1;")}}},
		"bad SQL":            {filepath.Join(dir, "d.db"), fstest.MapFS{"0001_a.sql": {Data: []byte("CREATE TABLEX")}}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			db, err := sqldb.Open(ctx, tt.path, sqldb.Options{Migrations: tt.fsys})
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

func TestWriteTxRollsBack(t *testing.T) {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, filepath.Join(t.TempDir(), "x.db"), sqldb.Options{
		Migrations: fstest.MapFS{"0001_a.sql": {Data: []byte("CREATE TABLE a (x INTEGER);")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	boom := errors.New("boom")
	err = db.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO a VALUES (1)"); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("err = %v; want fn's error", err)
	}
	var n int
	if err := db.R.QueryRowContext(ctx, "SELECT COUNT(*) FROM a").Scan(&n); err != nil || n != 0 {
		t.Errorf("rows = %d, %v; want the insert rolled back", n, err)
	}
}
