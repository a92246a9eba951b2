package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"
	"time"

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

// TestBulkReadsLeaveAConnection: while listings hold every connection they
// may, a point read still runs at once, and a further listing waits its
// turn instead of taking the last connection.
func TestBulkReadsLeaveAConnection(t *testing.T) {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, filepath.Join(t.TempDir(), "x.db"), sqldb.Options{Readers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	release := make(chan struct{})
	held := make(chan struct{})
	for i := 0; i < 2; i++ { // Readers-1 listings hold their connections
		go db.Read(ctx, sqldb.BulkRead, func(r *sql.DB) error {
			held <- struct{}{}
			<-release
			return nil
		})
		<-held
	}
	third := make(chan struct{})
	go db.Read(ctx, sqldb.BulkRead, func(r *sql.DB) error { close(third); return nil })

	done := make(chan error, 1)
	go func() {
		done <- db.Read(ctx, sqldb.PointRead, func(r *sql.DB) error {
			var one int
			return r.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a point read waited behind listings that hold Readers-1 connections")
	}
	select {
	case <-third:
		t.Fatal("a third listing ran while two held their connections: nothing is left for point reads")
	default:
	}
	close(release)
	select {
	case <-third:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting listing never ran")
	}
}

// TestReadsAreAdmittedInArrivalOrder: with one connection, queued reads run
// in the order they asked (database/sql alone picks a random waiter).
func TestReadsAreAdmittedInArrivalOrder(t *testing.T) {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, filepath.Join(t.TempDir(), "x.db"), sqldb.Options{Readers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	release := make(chan struct{})
	held := make(chan struct{})
	go db.Read(ctx, sqldb.PointRead, func(r *sql.DB) error { close(held); <-release; return nil })
	<-held
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	const n = 50
	for i := 0; i < n; i++ {
		wg.Add(1)
		queued := make(chan struct{})
		go func() {
			defer wg.Done()
			close(queued)
			db.Read(ctx, sqldb.PointRead, func(r *sql.DB) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			})
		}()
		<-queued
		waitQueued(t, db, i+1)
	}
	close(release)
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("admitted out of order: %v", order)
		}
	}
}

// waitQueued polls until n reads wait for admission.
func waitQueued(t *testing.T, db *sqldb.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.Waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads queued, want %d", db.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
