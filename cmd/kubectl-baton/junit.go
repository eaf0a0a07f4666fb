package main

import (
	"encoding/xml"
	"fmt"
	"strings"
	"time"
)

// JUnit XML, as CI systems read test reports: one testsuite for the folder, one testcase per
// case, a failure for a case whose replay missed an expectation and an error for a case that
// could not be replayed. encoding/xml escapes what the messages quote, and writes characters
// XML cannot hold as U+FFFD.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// junitReport is the suite's results as JUnit XML, suite named after the folder and against
// the config the cases were replayed against.
func junitReport(suite, against string, results []caseResult) ([]byte, error) {
	s := junitSuite{Name: suite, Tests: len(results), Properties: []junitProperty{{Name: "config", Value: against}}}
	var total time.Duration
	for _, r := range results {
		total += r.took
		c := junitCase{Name: r.Name, Classname: suite, Time: seconds(r.took)}
		switch r.Result {
		case resultFail:
			s.Failures++
			c.Failure = &junitProblem{Message: r.Failures[0], Type: "expectation", Text: strings.Join(r.Failures, "\n")}
		case resultError:
			s.Errors++
			c.Error = &junitProblem{Message: r.Error, Type: "replay", Text: r.Error}
		}
		s.Cases = append(s.Cases, c)
	}
	s.Time = seconds(total)
	doc := junitSuites{Name: "kubectl baton test", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Time: s.Time,
		Suites: []junitSuite{s}}
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("writing JUnit XML: %w", err)
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}

// seconds is a duration as JUnit writes it.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.3f", d.Seconds())
}
