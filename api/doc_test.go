package api

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// jsonKeys lists the JSON paths of every field of t, such as
// "runs.silent_seconds", descending into structs and slices of structs.
func jsonKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		key := prefix + name
		keys = append(keys, key)
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			keys = append(keys, jsonKeys(ft, key+".")...)
		}
	}
	return keys
}

// exampleKeys lists the JSON paths present in a decoded example.
func exampleKeys(v any, prefix string, into map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			into[prefix+k] = true
			exampleKeys(sub, prefix+k+".", into)
		}
	case []any:
		for _, sub := range v {
			exampleKeys(sub, prefix, into)
		}
	}
}

func TestDocs_StatusExample(t *testing.T) {
	// Ensure the JSON example in docs/status.md decodes into a Snapshot
	// without unknown fields and shows every field a Snapshot has.
	doc, err := os.ReadFile("../docs/status.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(doc, []byte("```json\n"))
	example, _, ok2 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 {
		t.Fatal("docs/status.md has no ```json block")
	}
	dec := json.NewDecoder(bytes.NewReader(example))
	dec.DisallowUnknownFields()
	var snap Snapshot
	if err := dec.Decode(&snap); err != nil {
		t.Fatalf("decode the example: %v", err)
	}
	var generic any
	if err := json.Unmarshal(example, &generic); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	exampleKeys(generic, "", have)
	for _, key := range jsonKeys(reflect.TypeFor[Snapshot](), "") {
		if !have[key] {
			t.Errorf("the example lacks %s", key)
		}
		leaf := key[strings.LastIndex(key, ".")+1:]
		if !regexp.MustCompile("[`.]" + leaf + "[`,.\\[]").Match(doc) {
			t.Errorf("docs/status.md does not describe %s", key)
		}
	}
}
