package main

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// pythonRoundTrips sets and reads back, through the Python Azure SDK,
// what Azure writes element by element: a new account's service
// properties, CORS rules, and stored access policies with and without a
// policy. It prints what it read as JSON.
const pythonRoundTrips = `
import json, sys
from azure.storage.queue import QueueServiceClient, CorsRule, AccessPolicy

svc = QueueServiceClient.from_connection_string(sys.argv[1])
out = {}
props = svc.get_service_properties()
hm = props["hour_metrics"]
out["hour"] = [hm.enabled, hm.include_apis, hm.retention_policy.enabled, hm.retention_policy.days]
out["minute"] = props["minute_metrics"].enabled
rule = CorsRule(["https://app.example"], ["GET", "PUT"], allowed_headers=["x-ms-meta-*"],
                exposed_headers=["x-ms-request-id"], max_age_in_seconds=60)
svc.set_service_properties(cors=[rule])
r = svc.get_service_properties()["cors"][0]
out["cors"] = [r.allowed_origins, r.allowed_methods, r.allowed_headers, r.exposed_headers, r.max_age_in_seconds]
# What it read it sets again.
svc.set_service_properties(cors=svc.get_service_properties()["cors"])
r = svc.get_service_properties()["cors"][0]
out["cors_again"] = [r.allowed_origins, r.allowed_methods, r.allowed_headers, r.exposed_headers, r.max_age_in_seconds]

q = svc.create_queue("pyacl")
q.set_queue_access_policy({"empty": None, "partial": AccessPolicy(permission="r")})
acl = q.get_queue_access_policy()
out["acl"] = {k: [v.permission, v.start, v.expiry] for k, v in sorted(acl.items())}
q.set_queue_access_policy(acl)
acl = q.get_queue_access_policy()
out["acl_again"] = {k: [v.permission, v.start, v.expiry] for k, v in sorted(acl.items())}
print(json.dumps(out))
`

// TestPythonSDKRoundTrips: the Python SDK reads Azure's shapes as azqd
// writes them (hour metrics on for a new account, CorsRule elements in
// Azure's order, an identifier without AccessPolicy) and sets what it
// read back unchanged.
func TestPythonSDKRoundTrips(t *testing.T) {
	t.Parallel()
	python := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import azure.storage.queue").Run() == nil {
			python = p
			break
		}
	}
	needProgram(t, "the Python Azure SDK is needed: apt-get install python3-azure, or pip install azure-storage-queue", python != "")
	d := start(t)
	out, err := exec.CommandContext(testContext(t), python, "-c", pythonRoundTrips, d.conns["devstoreaccount1"]).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got struct {
		Hour      []any            `json:"hour"`
		Minute    bool             `json:"minute"`
		CORS      []any            `json:"cors"`
		CORSAgain []any            `json:"cors_again"`
		ACL       map[string][]any `json:"acl"`
		ACLAgain  map[string][]any `json:"acl_again"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := `{"hour":[true,true,true,7],"minute":false,` +
		`"cors":["https://app.example","GET,PUT","x-ms-meta-*","x-ms-request-id",60],` +
		`"cors_again":["https://app.example","GET,PUT","x-ms-meta-*","x-ms-request-id",60],` +
		`"acl":{"empty":[null,null,null],"partial":["r",null,null]},` +
		`"acl_again":{"empty":[null,null,null],"partial":["r",null,null]}}`
	b, _ := json.Marshal(got)
	if string(b) != want {
		t.Fatalf("the Python SDK read\n%s\nwant\n%s", b, want)
	}
}
