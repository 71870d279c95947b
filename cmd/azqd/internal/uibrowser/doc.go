// Package uibrowser holds the test that drives package ui's page in a
// real browser (Chromium, through chromedp). It lives in azqd's module,
// which requires the browser driver for azqd's own browser test, so that
// the root module, and so every module that uses azq, does not.
//
//	go test ./cmd/azqd/internal/uibrowser -run TestBrowser -ui.screenshots=$PWD/docs
//
// writes the screenshots of the documentation.
package uibrowser
