// Package sts answers the two AWS Query-protocol calls the SageMaker Python
// SDK makes before it trains: STS GetCallerIdentity (to name its default
// bucket sagemaker-<region>-<account>) and IAM GetRole (for
// get_execution_role() or a role given by name). sagebox has no IAM: every
// caller is the configured account, and every role exists.
package sts

import (
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"
)

// Config is the identity the handler reports.
type Config struct {
	AccountID string
	Logger    *slog.Logger
}

// Handler serves POST / with an Action= form body.
type Handler struct {
	cfg Config
}

// New returns a Handler.
func New(cfg Config) *Handler {
	if cfg.AccountID == "" {
		cfg.AccountID = "123456789012"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg}
}

// IsQueryRequest reports whether r is an AWS Query-protocol call: a form
// POST to the root. S3 has no operation on POST /, so this never shadows it.
func IsQueryRequest(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/" &&
		strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
}

const (
	stsNS = "https://sts.amazonaws.com/doc/2011-06-15/"
	iamNS = "https://iam.amazonaws.com/doc/2010-05-08/"
)

// ServeHTTP dispatches on the Action parameter.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		h.fail(w, http.StatusBadRequest, "InvalidRequest", "could not read the request body")
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		h.fail(w, http.StatusBadRequest, "MalformedQueryString", "the request body is not a valid form")
		return
	}
	switch action := form.Get("Action"); action {
	case "GetCallerIdentity":
		h.reply(w, getCallerIdentityResponse{
			Xmlns: stsNS,
			Result: callerIdentity{
				Arn:     fmt.Sprintf("arn:aws:iam::%s:user/sagebox", h.cfg.AccountID),
				UserID:  "AIDASAGEBOX",
				Account: h.cfg.AccountID,
			},
			Meta: meta{RequestID: uuid.NewString()},
		})
	case "GetRole":
		name := form.Get("RoleName")
		if name == "" {
			h.fail(w, http.StatusBadRequest, "ValidationError", "1 validation error detected: Value null at 'roleName' failed to satisfy constraint: Member must not be null")
			return
		}
		h.reply(w, getRoleResponse{
			Xmlns: iamNS,
			Result: getRoleResult{Role: role{
				Path:     "/",
				RoleName: name,
				RoleID:   "AROASAGEBOX",
				Arn:      fmt.Sprintf("arn:aws:iam::%s:role/%s", h.cfg.AccountID, name),
			}},
			Meta: meta{RequestID: uuid.NewString()},
		})
	case "":
		h.fail(w, http.StatusBadRequest, "MissingAction", "the request has no Action parameter")
	default:
		h.fail(w, http.StatusBadRequest, "InvalidAction", fmt.Sprintf("sagebox does not implement the Query action %q (only STS GetCallerIdentity and IAM GetRole)", action))
	}
}

type meta struct {
	RequestID string `xml:"RequestId"`
}

type callerIdentity struct {
	Arn     string `xml:"Arn"`
	UserID  string `xml:"UserId"`
	Account string `xml:"Account"`
}

type getCallerIdentityResponse struct {
	XMLName xml.Name       `xml:"GetCallerIdentityResponse"`
	Xmlns   string         `xml:"xmlns,attr"`
	Result  callerIdentity `xml:"GetCallerIdentityResult"`
	Meta    meta           `xml:"ResponseMetadata"`
}

type role struct {
	Path     string `xml:"Path"`
	RoleName string `xml:"RoleName"`
	RoleID   string `xml:"RoleId"`
	Arn      string `xml:"Arn"`
}

type getRoleResult struct {
	Role role `xml:"Role"`
}

type getRoleResponse struct {
	XMLName xml.Name      `xml:"GetRoleResponse"`
	Xmlns   string        `xml:"xmlns,attr"`
	Result  getRoleResult `xml:"GetRoleResult"`
	Meta    meta          `xml:"ResponseMetadata"`
}

type errorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

func (h *Handler) reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, xml.Header)
	if err := xml.NewEncoder(w).Encode(v); err != nil {
		h.cfg.Logger.Warn("write query response", "error", err)
	}
}

func (h *Handler) fail(w http.ResponseWriter, status int, code, msg string) {
	var e errorResponse
	e.Error.Type, e.Error.Code, e.Error.Message = "Sender", code, msg
	e.RequestID = uuid.NewString()
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	io.WriteString(w, xml.Header)
	xml.NewEncoder(w).Encode(e)
}
