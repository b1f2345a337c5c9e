package testcluster

import (
	"crypto/tls"
	"io"
	"net/http"
	"time"
)

// Scrape GETs url as a scraper of an operator's monitoring port would: with
// the bearer token when it is not empty, trusting the port's self-signed
// certificate. It returns the status code and the body.
func Scrape(url, token string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the port's certificate is made at its start
	}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
