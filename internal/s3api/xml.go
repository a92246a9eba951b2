package s3api

import (
	"encoding/xml"
	"io"
	"net/http"
	"time"
)

// xmlns is the S3 namespace every response document declares.
const xmlns = "http://s3.amazonaws.com/doc/2006-03-01/"

// timeFormat is how S3 writes timestamps in XML.
const timeFormat = "2006-01-02T15:04:05.000Z"

func xmlTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// encodeXML writes the XML declaration and v.
func encodeXML(w io.Writer, v any) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	return xml.NewEncoder(w).Encode(v)
}

// writeXML answers 200 with v as an XML document.
func writeXML(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	return encodeXML(w, v)
}

type owner struct {
	ID          string
	DisplayName string
}

type listAllMyBucketsResult struct {
	XMLName           xml.Name `xml:"ListAllMyBucketsResult"`
	Xmlns             string   `xml:"xmlns,attr"`
	Owner             owner
	Buckets           []bucketXML `xml:"Buckets>Bucket"`
	ContinuationToken string      `xml:",omitempty"`
	Prefix            string      `xml:",omitempty"`
}

type bucketXML struct {
	Name         string
	CreationDate string
	BucketRegion string `xml:",omitempty"`
}

type createBucketConfiguration struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string
}

type locationConstraint struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	Xmlns   string   `xml:"xmlns,attr"`
	Region  string   `xml:",chardata"`
}

type versioningConfiguration struct {
	XMLName xml.Name `xml:"VersioningConfiguration"`
	Xmlns   string   `xml:"xmlns,attr"`
}

type contentXML struct {
	Key               string
	LastModified      string
	ETag              string
	Size              int64
	Owner             *owner `xml:",omitempty"`
	StorageClass      string
	ChecksumAlgorithm string `xml:",omitempty"`
}

type commonPrefixXML struct {
	Prefix string
}

type listBucketResultV2 struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	Xmlns                 string   `xml:"xmlns,attr"`
	Name                  string
	Prefix                string
	Delimiter             string `xml:",omitempty"`
	MaxKeys               int
	EncodingType          string `xml:",omitempty"`
	KeyCount              int
	IsTruncated           bool
	ContinuationToken     string            `xml:",omitempty"`
	NextContinuationToken string            `xml:",omitempty"`
	StartAfter            string            `xml:",omitempty"`
	Contents              []contentXML      `xml:"Contents"`
	CommonPrefixes        []commonPrefixXML `xml:"CommonPrefixes"`
}

type listBucketResultV1 struct {
	XMLName        xml.Name `xml:"ListBucketResult"`
	Xmlns          string   `xml:"xmlns,attr"`
	Name           string
	Prefix         string
	Marker         string
	NextMarker     string `xml:",omitempty"`
	Delimiter      string `xml:",omitempty"`
	MaxKeys        int
	EncodingType   string `xml:",omitempty"`
	IsTruncated    bool
	Contents       []contentXML      `xml:"Contents"`
	CommonPrefixes []commonPrefixXML `xml:"CommonPrefixes"`
}

// checksumXML carries the checksum members several responses share.
type checksumXML struct {
	ChecksumCRC32     string `xml:",omitempty"`
	ChecksumCRC32C    string `xml:",omitempty"`
	ChecksumCRC64NVME string `xml:",omitempty"`
	ChecksumSHA1      string `xml:",omitempty"`
	ChecksumSHA256    string `xml:",omitempty"`
}

type initiateMultipartUploadResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Bucket   string
	Key      string
	UploadID string `xml:"UploadId"`
}

type completeMultipartUpload struct {
	XMLName xml.Name          `xml:"CompleteMultipartUpload"`
	Parts   []completePartXML `xml:"Part"`
}

type completePartXML struct {
	PartNumber int
	ETag       string
	checksumXML
}

type completeMultipartUploadResult struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Location string
	Bucket   string
	Key      string
	ETag     string
	checksumXML
	ChecksumType string `xml:",omitempty"`
}

type copyObjectResult struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	ETag         string
	LastModified string
	checksumXML
}

type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool
	Objects []struct {
		Key       string
		VersionID string `xml:"VersionId"`
	} `xml:"Object"`
}

type deleteResult struct {
	XMLName xml.Name         `xml:"DeleteResult"`
	Xmlns   string           `xml:"xmlns,attr"`
	Deleted []deletedXML     `xml:"Deleted"`
	Errors  []deleteErrorXML `xml:"Error"`
}

type deletedXML struct {
	Key string
}

type deleteErrorXML struct {
	Key     string
	Code    string
	Message string
}

type partXML struct {
	PartNumber   int
	LastModified string
	ETag         string
	Size         int64
	checksumXML
}

type listPartsResult struct {
	XMLName              xml.Name `xml:"ListPartsResult"`
	Xmlns                string   `xml:"xmlns,attr"`
	Bucket               string
	Key                  string
	UploadID             string `xml:"UploadId"`
	Initiator            owner
	Owner                owner
	StorageClass         string
	PartNumberMarker     int
	NextPartNumberMarker int
	MaxParts             int
	IsTruncated          bool
	Parts                []partXML `xml:"Part"`
	ChecksumAlgorithm    string    `xml:",omitempty"`
	ChecksumType         string    `xml:",omitempty"`
}

type uploadXML struct {
	Key               string
	UploadID          string `xml:"UploadId"`
	Initiator         owner
	Owner             owner
	StorageClass      string
	Initiated         string
	ChecksumAlgorithm string `xml:",omitempty"`
	ChecksumType      string `xml:",omitempty"`
}

type listMultipartUploadsResult struct {
	XMLName            xml.Name `xml:"ListMultipartUploadsResult"`
	Xmlns              string   `xml:"xmlns,attr"`
	Bucket             string
	KeyMarker          string
	UploadIDMarker     string `xml:"UploadIdMarker"`
	NextKeyMarker      string
	NextUploadIDMarker string `xml:"NextUploadIdMarker"`
	Prefix             string
	MaxUploads         int
	IsTruncated        bool
	Uploads            []uploadXML `xml:"Upload"`
}
