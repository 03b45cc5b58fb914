package pg

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

// functionDDL finds the statements that create, change or drop a function.
var functionDDL = regexp.MustCompile(`(?i)\b(CREATE(\s+OR\s+REPLACE)?|ALTER|DROP)\s+FUNCTION\s+(IF\s+EXISTS\s+)?\{\{schema\}\}\.(\w+)`)

// functionSums records, for each schema version since the functions left
// the migrations, the sum of the function definitions Migrate installs at
// that version. A recorded sum never changes.
var functionSums = map[int]string{
	4:  "f5ea77b92f9fcf0e227b095856cbbb9f97c82c275358695213c032c211ebe273",
	5:  "f5ea77b92f9fcf0e227b095856cbbb9f97c82c275358695213c032c211ebe273",
	6:  "6a529df65bcbbac05ae745ee32cb365fc874fc154aa65d13538c5bec0efc150e",
	7:  "38c69ba6a0c6e17279f6a1b7428a4db185b4db82b3c989c51685ae5ca72ec934",
	8:  "38c69ba6a0c6e17279f6a1b7428a4db185b4db82b3c989c51685ae5ca72ec934",
	9:  "38c69ba6a0c6e17279f6a1b7428a4db185b4db82b3c989c51685ae5ca72ec934",
	10: "8aa8df14923b31b522fd10a52563b6c59c31c890157c8afded92dcfa679d3384",
	11: "8aa8df14923b31b522fd10a52563b6c59c31c890157c8afded92dcfa679d3384",
	12: "4a5b0fa668ba2606606a5038899be9dc0a5f8d38af7c16bf7b6821884e3bba05",
	13: "dd3db256fd04cda77ea5673e886205ade550bb8a3db2607774344fb4a7168bcd",
	14: "dd3db256fd04cda77ea5673e886205ade550bb8a3db2607774344fb4a7168bcd",
	15: "ef03761f05711f3044e0aa0da316ba1654922fb7d1fe3a261fd3c59e2c2c7979",
	16: "e1df9cdeacf093bf7ef6f21a3606d481d963c4bd8efd336833e35807042c9399",
	17: "e1df9cdeacf093bf7ef6f21a3606d481d963c4bd8efd336833e35807042c9399",
	18: "17f5db95605dae3e4a021324e6980da8495a77fce7dd859476a7796654fa15c4",
	19: "4bf306ca467b8dc8487e2d9147a14683b0bea76b82acf82406a75e8cef3c8295",
	20: "9b6e42b233944dbb5b51b0865b9cbc69fa57ba4d45e962da2cff74ff039cf533",
	21: "81a254f6ced6dd145aa4f4d968a0e99b5bf5170e4075e6b779328b238246d1c2",
	22: "b4de48a2557e8ee865034d9bccbe61475c3360ad7cfe35911b79b8305c37ffe8",
	23: "f0859573469174bc49d1da019de7074caa812aa51d944b18dea0d0a3911857ed",
	24: "11798a78629211b2e199b43a6199bb35c5b014e9e7e56d0288591163096a1345",
}

// Ensure each file of functions/ holds one CREATE OR REPLACE FUNCTION, of
// the function it is named after, and nothing else that changes functions.
func TestFunctions_OneFilePerFunction(t *testing.T) {
	fns := functions()
	if len(fns) == 0 {
		t.Fatal("no functions embedded")
	}
	for _, f := range fns {
		ms := functionDDL.FindAllStringSubmatch(f.sql, -1)
		if len(ms) != 1 || !strings.EqualFold(strings.Join(strings.Fields(ms[0][1]), " "), "CREATE OR REPLACE") || ms[0][4] != f.name {
			t.Errorf("functions/%s.sql: want one CREATE OR REPLACE FUNCTION {{schema}}.%s, got %q", f.name, f.name, ms)
		}
	}
}

// Ensure the migrations hold no function definitions: a migration may only
// drop a function whose signature or result changed.
func TestMigrations_NoFunctions(t *testing.T) {
	for _, m := range migrations() {
		for _, ms := range functionDDL.FindAllStringSubmatch(m.sql, -1) {
			if !strings.EqualFold(ms[1], "DROP") {
				t.Errorf("migration %s: %s FUNCTION %s; functions belong in functions/%s.sql", m.name, ms[1], ms[4], ms[4])
			}
		}
	}
}

// Ensure a change to a function comes with a new migration. Migrate
// recreates the functions only when it applies a migration, so a schema
// already at the latest version would otherwise keep the old bodies, and
// its version would no longer say which functions it has.
func TestFunctions_ChangeNeedsMigration(t *testing.T) {
	h := sha256.New()
	for _, f := range functions() {
		_, stmt, _ := strings.Cut(f.sql, "CREATE OR REPLACE FUNCTION")
		h.Write([]byte(f.name + "\n" + stmt + "\n"))
	}
	got := hex.EncodeToString(h.Sum(nil))
	v := LatestVersion()
	want, ok := functionSums[v]
	switch {
	case !ok:
		t.Fatalf("no function sum recorded for version %d: add %d: %q to functionSums", v, v, got)
	case got != want:
		t.Fatalf("the functions differ from those of version %d (sum %s, recorded %s): a changed function "+
			"needs a new migration, which may hold no DDL; add migration %d and record %d: %q in functionSums",
			v, got, want, v+1, v+1, got)
	}
}
