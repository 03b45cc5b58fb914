package lease

import (
	"encoding/json"
	"fmt"
)

// MaxPayloadDepth caps how deeply a payload nests arrays and objects
// (CheckPayload refuses more). A payload is shown inside other JSON (a
// listing, a page's twin) and indented on the task page; deeper text than
// this would make both cost far more than its size, and past Go's own
// limit of 10,000 it cannot be embedded at all.
const MaxPayloadDepth = 64

// PayloadDepth returns the deepest nesting of arrays and objects in the
// JSON text js (0 for a scalar), reading brackets outside strings. It
// does not check that js is valid.
func PayloadDepth(js []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(js); i++ {
		switch c := js[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// ShowPayload returns a stored payload fit to be shown inside other JSON:
// the payload itself when it passes CheckPayload's depth and JSON checks,
// else its text as a JSON string, with a note saying why. Payloads
// enqueued through ValidateEnqueue always pass; one written by other
// means (SQL, an older qd) may not, and must not break a listing.
func ShowPayload(p json.RawMessage) (json.RawMessage, string) {
	var note string
	switch d := PayloadDepth(p); {
	case d > MaxPayloadDepth:
		note = fmt.Sprintf("the stored payload nests %d levels deep, more than the limit of %d: shown as text", d, MaxPayloadDepth)
	case !json.Valid(p):
		note = "the stored payload is not valid JSON: shown as text"
	default:
		return p, ""
	}
	text, _ := json.Marshal(string(p)) // a string always encodes
	return text, note
}
