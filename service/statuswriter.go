package service

import "net/http"

// StatusWriter records the status code of an HTTP answer and the caller
// it served, for the access log and the metrics of both transports (api,
// mcp). Code is 200 once a body is written without a header.
type StatusWriter struct {
	http.ResponseWriter
	Code   int
	Caller string
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *StatusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
