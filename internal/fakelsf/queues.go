package fakelsf

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// queueInfo serves "Get basic or detailed queue information by queue name"
// for getfullinfo: POST ws/queues/getfullinfo with the mandatory form
// parameter names (queues separated by commas, or all); 400 without it,
// 404 "No queues that match the specified criteria were found." when none
// is known, else the detailed fields of the 10.2 documentation's example,
// {"@total","queue"} in JSON (one queue an object, several an array) or
// <queues total><queue>… in XML. numPend and numRun count the fake's jobs
// in the queue (a job without QUEUE is in the default queue, normal).
func (f *Server) queueInfo(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		fail(w, r, 400, "The names parameter is mandatory.")
		return
	}
	body, _ := io.ReadAll(r.Body)
	form, err := url.ParseQuery(string(body))
	names := form.Get("names")
	if err != nil || names == "" {
		fail(w, r, 400, "The names parameter is mandatory.")
		return
	}
	f.Mu.Lock()
	var qs []map[string]string
	for _, name := range f.queueNames(names) {
		qs = append(qs, f.queueFields(name))
	}
	f.Mu.Unlock()
	if len(qs) == 0 {
		fail(w, r, 404, "No queues that match the specified criteria were found.")
		return
	}
	if wantsJSON(r) {
		doc := map[string]any{"@total": strconv.Itoa(len(qs)), "queue": qs}
		if len(qs) == 1 {
			doc["queue"] = qs[0]
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	fmt.Fprintf(w, `<queues total="%d"><atom:link href="self" rel="%s"/>`, len(qs), r.URL.String())
	for _, q := range qs {
		io.WriteString(w, "<queue>")
		for _, k := range queueFieldOrder {
			var b bytes.Buffer
			_ = xml.EscapeText(&b, []byte(q[k]))
			fmt.Fprintf(w, "<%s>%s</%s>", k, b.String(), k)
		}
		io.WriteString(w, "</queue>")
	}
	io.WriteString(w, "</queues>")
}

// queueFieldOrder is the documentation's order of a queue's fields.
var queueFieldOrder = []string{"queueDescription", "queueName", "priority", "nice", "maxNumJobSlots", "jlPerUser", "jlPerProcessor",
	"jlPerHost", "numJob", "numPend", "numRun", "numSsusp", "numUsusp", "numReserve", "acceptInterval", "users", "hosts", "status"}

// queueNames are the known queues among names ("all": every one), sorted
// (f.mu held).
func (f *Server) queueNames(names string) []string {
	var out []string
	for _, n := range strings.Split(names, ",") {
		if _, ok := f.QueueStatus[n]; ok {
			out = append(out, n)
		}
		if n == "all" {
			for q := range f.QueueStatus {
				out = append(out, q)
			}
		}
	}
	sort.Strings(out)
	return out
}

// queueFields are a queue's detailed fields (f.mu held).
func (f *Server) queueFields(name string) map[string]string {
	pend, run, susp := 0, 0, 0
	for _, j := range f.Jobs {
		if cmp.Or(j.Params["QUEUE"], "normal") != name || j.Left {
			continue
		}
		switch j.Status {
		case "PEND":
			pend++
		case "RUN":
			run++
		case "USUSP", "SSUSP", "PSUSP":
			susp++
		}
	}
	return map[string]string{"queueDescription": "For " + name + " jobs", "queueName": name, "priority": "30", "nice": "20",
		"maxNumJobSlots": "-", "jlPerUser": "-", "jlPerProcessor": "-", "jlPerHost": "-",
		"numJob": strconv.Itoa(pend + run + susp), "numPend": strconv.Itoa(pend), "numRun": strconv.Itoa(run),
		"numSsusp": "0", "numUsusp": strconv.Itoa(susp), "numReserve": "0", "acceptInterval": "0",
		"users": "all", "hosts": "all", "status": f.QueueStatus[name]}
}
