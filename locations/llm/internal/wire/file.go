package wire

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
)

// DataURL splits a data: URL (RFC 2397) into its media type and its payload
// encoded as standard base64, which is what both providers take for inline
// images and documents. ok is false for any other URL or a malformed one.
// A missing media type defaults to text/plain, as the RFC says.
func DataURL(u string) (mediaType, b64 string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, payload, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	isBase64 := false
	if m, cut := strings.CutSuffix(meta, ";base64"); cut {
		meta, isBase64 = m, true
	}
	mediaType = "text/plain"
	if meta != "" && !strings.HasPrefix(meta, ";") {
		mt, _, err := mime.ParseMediaType(meta)
		if err != nil {
			return "", "", false
		}
		mediaType = mt
	}
	if isBase64 {
		if _, err := base64.StdEncoding.DecodeString(payload); err != nil {
			return "", "", false
		}
		return mediaType, payload, true
	}
	raw, err := url.PathUnescape(payload)
	if err != nil {
		return "", "", false
	}
	return mediaType, base64.StdEncoding.EncodeToString([]byte(raw)), true
}

// IsImage reports whether a media type is an image both providers accept
// inline.
func IsImage(mediaType string) bool {
	switch mediaType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// isText reports whether a media type is text a model can read inline.
func isText(mediaType string) bool {
	return strings.HasPrefix(mediaType, "text/") || mediaType == "application/json" ||
		mediaType == "application/xml" || mediaType == "application/yaml" ||
		strings.HasSuffix(mediaType, "+json") || strings.HasSuffix(mediaType, "+xml")
}

// FileNote renders an attachment the provider cannot take natively as a text
// note for the model. A text attachment inlined as a data: URL is reproduced
// in full inside a <file> element; any other attachment is named with its
// media type, and with its URL unless that is a data: URL (the bytes would be
// noise to the model).
func FileNote(f messages.File) string {
	name := f.Filename
	if name == "" {
		name = "attachment"
	}
	mediaType, b64, ok := DataURL(f.URL)
	if ok && isText(mediaType) {
		if raw, err := base64.StdEncoding.DecodeString(b64); err == nil && utf8.Valid(raw) {
			return fmt.Sprintf("<file name=%q type=%q>\n%s\n</file>", name, mediaType, raw)
		}
	}
	mt := f.Mime
	if mt == "" {
		mt = mediaType
	}
	if ok || f.URL == "" {
		return fmt.Sprintf("[Attached file %q (%s); its content is not available to the model.]", name, mt)
	}
	return fmt.Sprintf("[Attached file %q (%s) at %s]", name, mt, f.URL)
}
