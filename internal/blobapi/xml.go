package blobapi

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Blob is what a listing and Get Blob Properties say of one blob.
type Blob struct {
	Name        string
	Size        int64
	ContentType string
	MD5         string // base64
	ETag        string // quoted
	Created     time.Time
	Modified    time.Time
	Metadata    map[string]string
}

// ListResult is one page of List Blobs.
type ListResult struct {
	ServiceEndpoint string
	Container       string
	Prefix          string
	Marker          string
	MaxResults      int
	Delimiter       string
	Blobs           []Blob
	Prefixes        []string // with a delimiter: the "folders" of this page
	NextMarker      string
	WithMetadata    bool
}

type xmlProps struct {
	CreationTime  string `xml:"Creation-Time"`
	LastModified  string `xml:"Last-Modified"`
	Etag          string `xml:"Etag"`
	ContentLength int64  `xml:"Content-Length"`
	ContentType   string `xml:"Content-Type"`
	ContentMD5    string `xml:"Content-MD5,omitempty"`
	BlobType      string `xml:"BlobType"`
	AccessTier    string `xml:"AccessTier"`
	LeaseStatus   string `xml:"LeaseStatus"`
	LeaseState    string `xml:"LeaseState"`
	Encrypted     bool   `xml:"ServerEncrypted"`
}

type xmlMeta struct {
	Items []xmlMetaItem
}

type xmlMetaItem struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

type xmlBlob struct {
	Name       string   `xml:"Name"`
	Properties xmlProps `xml:"Properties"`
	Metadata   *xmlMeta `xml:"Metadata"`
}

type xmlPrefix struct {
	Name string `xml:"Name"`
}

type xmlBlobs struct {
	Blobs    []xmlBlob   `xml:"Blob"`
	Prefixes []xmlPrefix `xml:"BlobPrefix"`
}

type xmlList struct {
	XMLName         xml.Name `xml:"EnumerationResults"`
	ServiceEndpoint string   `xml:"ServiceEndpoint,attr"`
	ContainerName   string   `xml:"ContainerName,attr"`
	Prefix          string   `xml:"Prefix"`
	Marker          string   `xml:"Marker"`
	MaxResults      int      `xml:"MaxResults"`
	Delimiter       string   `xml:"Delimiter,omitempty"`
	Blobs           xmlBlobs `xml:"Blobs"`
	NextMarker      string   `xml:"NextMarker"`
}

func (m *xmlMeta) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	if err := e.EncodeToken(start); err != nil {
		return err
	}
	for _, it := range m.Items {
		if err := e.EncodeElement(it.Value, xml.StartElement{Name: it.XMLName}); err != nil {
			return err
		}
	}
	return e.EncodeToken(start.End())
}

// Properties are a blob's properties as a listing writes them.
func properties(b Blob) xmlProps {
	return xmlProps{CreationTime: b.Created.UTC().Format(http.TimeFormat), LastModified: b.Modified.UTC().Format(http.TimeFormat),
		Etag: b.ETag, ContentLength: b.Size, ContentType: b.ContentType, ContentMD5: b.MD5, BlobType: "BlockBlob", AccessTier: "Hot",
		LeaseStatus: "unlocked", LeaseState: "available", Encrypted: true}
}

// MarshalList renders a List Blobs page.
func MarshalList(l ListResult) []byte {
	x := xmlList{ServiceEndpoint: l.ServiceEndpoint, ContainerName: l.Container, Prefix: l.Prefix, Marker: l.Marker,
		MaxResults: l.MaxResults, Delimiter: l.Delimiter, NextMarker: l.NextMarker}
	for _, b := range l.Blobs {
		xb := xmlBlob{Name: b.Name, Properties: properties(b)}
		if l.WithMetadata {
			xb.Metadata = &xmlMeta{}
			keys := make([]string, 0, len(b.Metadata))
			for k := range b.Metadata {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				xb.Metadata.Items = append(xb.Metadata.Items, xmlMetaItem{XMLName: xml.Name{Local: k}, Value: b.Metadata[k]})
			}
		}
		x.Blobs.Blobs = append(x.Blobs.Blobs, xb)
	}
	for _, p := range l.Prefixes {
		x.Blobs.Prefixes = append(x.Blobs.Prefixes, xmlPrefix{Name: p})
	}
	out, _ := xml.Marshal(x) // only strings and numbers: cannot fail
	return append([]byte(xml.Header), out...)
}

// BlockRef is one entry of a block list: an id and where to find it.
type BlockRef struct {
	ID   string
	From string // "Latest", "Committed" or "Uncommitted"
}

// ParseBlockList reads a Put Block List body, in order.
func ParseBlockList(body []byte) ([]BlockRef, error) {
	d := xml.NewDecoder(strings.NewReader(string(body)))
	var out []BlockRef
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("the block list is not XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 1 && t.Name.Local != "BlockList" {
				return nil, fmt.Errorf("the block list's root element is %s, not BlockList", t.Name.Local)
			}
			if depth == 2 {
				switch t.Name.Local {
				case "Latest", "Committed", "Uncommitted":
					var id string
					if err := d.DecodeElement(&id, &t); err != nil {
						return nil, fmt.Errorf("block list: %w", err)
					}
					out = append(out, BlockRef{ID: strings.TrimSpace(id), From: t.Name.Local})
					depth--
				default:
					return nil, fmt.Errorf("block list: element %s is not Latest, Committed or Uncommitted", t.Name.Local)
				}
			}
		case xml.EndElement:
			depth--
		}
	}
	return out, nil
}

// ErrorBody is the XML body of a failed request.
func ErrorBody(code, message, requestID string, now time.Time) []byte {
	type xmlError struct {
		XMLName xml.Name `xml:"Error"`
		Code    string   `xml:"Code"`
		Message string   `xml:"Message"`
	}
	msg := message + "\nRequestId:" + requestID + "\nTime:" + now.UTC().Format("2006-01-02T15:04:05.0000000Z")
	out, _ := xml.Marshal(xmlError{Code: code, Message: msg})
	return append([]byte(xml.Header), out...)
}

// Range is a byte range of a blob, both ends included.
type Range struct{ Start, End int64 }

// ParseRange reads an x-ms-range or Range header ("bytes=START-[END]")
// for a blob of size bytes. ok is false for no header; an unsatisfiable
// range (at or past the end, or any range of an empty blob) is an error.
func ParseRange(h string, size int64) (r Range, ok bool, err error) {
	if h == "" {
		return Range{}, false, nil
	}
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	a, b, dash := strings.Cut(spec, "-")
	if !found || !dash || strings.Contains(spec, ",") {
		return Range{}, false, fmt.Errorf("the range %q is not bytes=START-END", h)
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return Range{}, false, fmt.Errorf("the range %q is not bytes=START-END", h)
	}
	end := size - 1
	if b != "" {
		if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
			return Range{}, false, fmt.Errorf("the range %q is not bytes=START-END", h)
		}
		end = min(end, size-1)
	}
	if start >= size {
		return Range{}, false, errUnsatisfiable
	}
	return Range{start, end}, true, nil
}

// errUnsatisfiable is ParseRange's error for a range past the end.
var errUnsatisfiable = fmt.Errorf("InvalidRange: The range specified is invalid for the current size of the resource")

// IsUnsatisfiable reports ParseRange's error for a range past the end.
func IsUnsatisfiable(err error) bool { return err == errUnsatisfiable }

// MetadataHeaders is the prefix of metadata headers.
const MetadataHeaders = "X-Ms-Meta-"

// Metadata reads x-ms-meta-* headers (names lower-cased, as Azure keeps
// them case-insensitively).
func Metadata(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if name, ok := strings.CutPrefix(http.CanonicalHeaderKey(k), MetadataHeaders); ok && len(v) > 0 {
			out[strings.ToLower(name)] = v[0]
		}
	}
	return out
}
