package harness

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Scrape GETs url as a scraper of an operator's monitoring port would: with
// the bearer token when it is not empty, trusting the port's self-signed
// certificate. It returns the status code and the body.
func Scrape(ctx context.Context, url, token string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the port's certificate is made at its start
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
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

// Metric is the value of a series in a Prometheus text exposition: the
// metric's name, with its labels as the exposition writes them when it has
// any. ok is false when the series is absent.
func Metric(exposition, series string) (value float64, ok bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, found := strings.CutPrefix(line, series+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}
