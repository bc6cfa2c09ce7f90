package pipeline

import "strings"

// maxReasonKind bounds the length of a skip reason's kind in summaries.
const maxReasonKind = 80

// ShortReason shortens a skip reason for a summary line: at most maxReasonKind bytes, cut at a
// word boundary and marked with "...", so a number or a name is shown whole or not at all
// ("limit of 178956970" never reads "limit of 17895697"). Short reasons are returned as they are.
func ShortReason(s string) string {
	if len(s) <= maxReasonKind {
		return s
	}
	cut := strings.LastIndexByte(s[:maxReasonKind-3], ' ')
	if cut <= 0 {
		cut = maxReasonKind - 3
		for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
	}
	return strings.TrimRight(s[:cut], " ,;:") + "..."
}
