package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/sagebox/sagebox/internal/controlplane"
	"github.com/sagebox/sagebox/internal/modelserver"
	"github.com/sagebox/sagebox/internal/router"
	"github.com/sagebox/sagebox/internal/sigv4"
)

// queryMaxBody is the STS/IAM Query handler's own body limit.
const queryMaxBody = 64 << 10

// sigv4Authenticator adapts the SigV4 verifier to the router: each service
// on the address gets the credential scope AWS would demand of it and the
// body cap its handler really applies, so a forged request costs the
// server at most that cap.
type sigv4Authenticator struct{ v *sigv4.Verifier }

func (a sigv4Authenticator) Authenticate(r *http.Request, svc router.Service) error {
	_, err := a.v.VerifyRoute(r, routeFor(r, svc))
	return err
}

// routeFor is what the addressed API expects of a signature.
func routeFor(r *http.Request, svc router.Service) sigv4.Route {
	switch svc {
	case router.ServiceJSON:
		if strings.HasPrefix(r.Header.Get("X-Amz-Target"), "Logs_20140328.") {
			return sigv4.Route{Services: []string{"logs"}, MaxBody: controlplane.DefaultMaxBodyBytes}
		}
		return sigv4.Route{Services: []string{"sagemaker"}, MaxBody: controlplane.DefaultMaxBodyBytes}
	case router.ServiceRuntime:
		// sagemaker-runtime signs as "sagemaker"; InvokeEndpoint's limit.
		return sigv4.Route{Services: []string{"sagemaker"}, MaxBody: modelserver.DefaultMaxPayload}
	case router.ServiceQuery:
		return sigv4.Route{Services: []string{"sts", "iam"}, MaxBody: queryMaxBody}
	case router.ServiceS3:
		return sigv4.Route{Services: []string{"s3"}}
	default: // sagebox's own routes (metrics): any service, no body to speak of
		return sigv4.Route{MaxBody: 64 << 10}
	}
}

// parseCredentials reads ACCESS_KEY:SECRET pairs from flags,
// SAGEBOX_CREDENTIALS (comma-separated) and the lines of a credentials file.
func parseCredentials(flags []string, fromEnv string, fileLines []string) (map[string]string, error) {
	all := append([]string(nil), flags...)
	if fromEnv != "" {
		all = append(all, strings.Split(fromEnv, ",")...)
	}
	all = append(all, fileLines...)
	creds := map[string]string{}
	for _, c := range all {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		k, s, ok := strings.Cut(c, ":")
		if !ok || k == "" || s == "" {
			// Never echo a secret back: name the key id only.
			return nil, fmt.Errorf("credentials entry for %q: want ACCESS_KEY:SECRET", k)
		}
		creds[k] = s
	}
	return creds, nil
}

// readCredentialsFile returns the ACCESS_KEY:SECRET lines of path, without
// blank lines and # comments. A file that group or others may read is
// refused, as ssh refuses such a private key: its secrets are not secret.
func readCredentialsFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("credentials file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("credentials file %s has mode %04o: other users may read it; chmod 600 it", path, st.Mode().Perm())
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, s, ok := strings.Cut(line, ":"); !ok || k == "" || s == "" {
			return nil, fmt.Errorf("credentials file %s line %d: want ACCESS_KEY:SECRET", path, n)
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	return lines, nil
}
