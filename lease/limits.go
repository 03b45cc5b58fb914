package lease

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// The ranges of a task's numbers and key, as every provider stores them:
// a priority and a number of attempts are 32-bit integers in PostgreSQL,
// and a dedupe key is indexed, so it must fit an index entry with room to
// spare. A value outside them is refused before anything is written.
const (
	MinPriority       = math.MinInt32
	MaxPriority       = math.MaxInt32
	MaxMaxAttempts    = math.MaxInt32
	MaxDedupeKeyBytes = 1024
	MaxLaneLimit      = math.MaxInt32
)

// CheckLaneLimit refuses a lane limit (max_running) outside
// 1..MaxLaneLimit.
func CheckLaneLimit(n int) error {
	if n < 1 || n > MaxLaneLimit {
		return fmt.Errorf("%w: max running %d is out of range: it must be between 1 and %d", ErrInvalid, n, MaxLaneLimit)
	}
	return nil
}

// CheckPriority refuses a priority outside MinPriority..MaxPriority.
func CheckPriority(n int) error {
	if n < MinPriority || n > MaxPriority {
		return fmt.Errorf("%w: priority %d is out of range: it must be between %d and %d", ErrInvalid, n, MinPriority, MaxPriority)
	}
	return nil
}

// CheckMaxAttempts refuses a number of attempts outside 1..MaxMaxAttempts.
func CheckMaxAttempts(n int) error {
	if n < 1 || n > MaxMaxAttempts {
		return fmt.Errorf("%w: max attempts %d is out of range: it must be between 1 and %d", ErrInvalid, n, MaxMaxAttempts)
	}
	return nil
}

// CheckDedupeKey refuses a dedupe key longer than MaxDedupeKeyBytes, or
// holding NUL or invalid UTF-8, which PostgreSQL text cannot hold.
func CheckDedupeKey(k string) error {
	switch {
	case len(k) > MaxDedupeKeyBytes:
		return fmt.Errorf("%w: dedupe key is %d bytes, more than the %d-byte limit", ErrInvalid, len(k), MaxDedupeKeyBytes)
	case strings.ContainsRune(k, 0) || !utf8.ValidString(k):
		return fmt.Errorf("%w: dedupe key contains NUL or invalid UTF-8", ErrInvalid)
	}
	return nil
}

// CheckPayload refuses a payload that is too large, nests deeper than
// MaxPayloadDepth, is not JSON, or that no provider could store (see
// checkStorable).
func CheckPayload(payload []byte) error {
	if len(payload) > MaxPayloadBytes {
		return fmt.Errorf("%w: payload is %d bytes, more than the %d-byte limit", ErrInvalid, len(payload), MaxPayloadBytes)
	}
	if d := PayloadDepth(payload); d > MaxPayloadDepth {
		return fmt.Errorf("%w: payload nests %d levels deep, more than the limit of %d", ErrInvalid, d, MaxPayloadDepth)
	}
	if !json.Valid(payload) {
		return fmt.Errorf("%w: payload is not valid JSON", ErrInvalid)
	}
	return checkStorable(payload)
}

// checkStorable refuses a payload that every provider must be able to
// store and return byte for byte: valid UTF-8, and no \u0000 escape, which
// PostgreSQL's jsonb cannot hold. The payload is valid JSON already.
func checkStorable(payload []byte) error {
	switch {
	case !utf8.Valid(payload):
		return fmt.Errorf("%w: payload is not valid UTF-8", ErrInvalid)
	case hasNULEscape(payload):
		return fmt.Errorf("%w: payload contains \\u0000, which PostgreSQL cannot store", ErrInvalid)
	}
	return nil
}

// hasNULEscape reports whether the JSON text (already valid) holds a
// \u0000 escape inside a string.
func hasNULEscape(js []byte) bool {
	inString := false
	for i := 0; i < len(js); i++ {
		switch c := js[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if i+5 < len(js) && js[i+1] == 'u' && string(js[i+2:i+6]) == "0000" {
				return true
			}
			i++ // skip the escaped character
		}
	}
	return false
}
