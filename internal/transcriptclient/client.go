// Package transcriptclient reads runs' transcripts from the operator's transcript API
// (internal/transcriptapi serves it): a run's records a page at a time, the config it pinned,
// and its records as they are written. It is what kubectl baton and its console link of the
// API: HTTP and the record format, none of the server's authentication.
package transcriptclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/internal/records"
)

// Page is a run's records, oldest first, as the API's records endpoint answers.
type Page struct {
	Namespace string           `json:"namespace"`
	Run       string           `json:"run"`
	UID       string           `json:"uid"`
	Records   []records.Record `json:"records"`
	// Last is the Seq to resume after.
	Last int64 `json:"last"`
}

// Client reads the transcript API. Its HTTP client carries the caller's own Kubernetes
// credentials, so the API answers as their RBAC allows.
type Client struct {
	// Base is the API's URL, e.g. https://127.0.0.1:8443.
	Base string
	HTTP *http.Client
}

func (c *Client) runPath(namespace, name, what string) string {
	return fmt.Sprintf("%s/v1/namespaces/%s/agentruns/%s/%s", strings.TrimSuffix(c.Base, "/"), url.PathEscape(namespace), url.PathEscape(name), what)
}

// Records reads a run's records, all of them or one step's (step > 0), page by page, at most
// as many as an export holds (records.MaxExportRecords).
func (c *Client) Records(ctx context.Context, namespace, name string, step int32) (Page, error) {
	var all Page
	err := c.Pages(ctx, namespace, name, step, func(page Page) error {
		if all.UID == "" {
			all = page
		} else {
			all.Records = append(all.Records, page.Records...)
		}
		if len(all.Records) > records.MaxExportRecords {
			return fmt.Errorf("run %s has more than %d records, the most one read holds", name, records.MaxExportRecords)
		}
		return nil
	})
	return all, err
}

// Pages calls each with a run's records, all of them or one step's (step > 0), a page at a
// time, oldest first: a reader that keeps only what it needs of each record holds one page
// (the API bounds a page's bytes), however long the run.
func (c *Client) Pages(ctx context.Context, namespace, name string, step int32, each func(Page) error) error {
	return c.PagesAfter(ctx, namespace, name, step, 0, each)
}

// PagesAfter is Pages from the record after sequence number after on: a reader that follows a
// run reads only what is new.
func (c *Client) PagesAfter(ctx context.Context, namespace, name string, step int32, after int64, each func(Page) error) error {
	for {
		q := url.Values{"after": {strconv.FormatInt(after, 10)}}
		if step > 0 {
			q.Set("step", strconv.Itoa(int(step)))
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.runPath(namespace, name, "records")+"?"+q.Encode(), nil)
		if err != nil {
			return err
		}
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return fmt.Errorf("calling the transcript API: %w", err)
		}
		var page Page
		err = decode(resp, &page)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		if err := each(page); err != nil {
			return err
		}
		if len(page.Records) == 0 || page.Last == after {
			return nil
		}
		after = page.Last
	}
}

// Config reads the config a run pinned.
func (c *Client) Config(ctx context.Context, namespace, name string) (records.PinnedConfig, error) {
	var pinned records.PinnedConfig
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.runPath(namespace, name, "config"), nil)
	if err != nil {
		return pinned, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return pinned, fmt.Errorf("calling the transcript API: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	err = decode(resp, &pinned)
	return pinned, err
}

// Stream calls each with every record of the run as it is written, from the first, until the
// run ends; it returns the run's phase and reason then ("" when ctx ended first).
func (c *Client) Stream(ctx context.Context, namespace, name string, each func(records.Record) error) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.runPath(namespace, name, "stream"), nil)
	if err != nil {
		return "", err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return "", fmt.Errorf("calling the transcript API: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", decode(resp, nil)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "record":
			var r records.Record
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &r); err != nil {
				return "", err
			}
			if err := each(r); err != nil {
				return "", err
			}
		case strings.HasPrefix(line, "data: ") && (event == "end" || event == "error"):
			var m map[string]string
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m)
			if event == "error" {
				return "", errors.New(m["message"])
			}
			return m["phase"] + " " + m["reason"], nil
		}
	}
	return "", sc.Err()
}

// decode reads a JSON answer, or the error the API gave, as it gave it; the caller closes the
// body.
func decode(resp *http.Response, into any) error {
	if resp.StatusCode != http.StatusOK {
		// The API's errors are shaped like the API server's own (transcriptapi.Status).
		var st struct {
			Message string `json:"message"`
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			return fmt.Errorf("the transcript API answered %d: %s", resp.StatusCode, st.Message)
		}
		return fmt.Errorf("the transcript API answered %s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
