// Drives the server whose connection string is in AZQ_CONNECTION_STRING
// through @azure/storage-queue, the JavaScript SDK, and fails (exit code 1)
// on the first answer that differs from Azure's. server/jssdk_test.go runs
// it against an in-process server.
import assert from "node:assert/strict";
import {
  QueueServiceClient,
  StorageSharedKeyCredential,
  generateQueueSASQueryParameters,
  QueueSASPermissions,
} from "@azure/storage-queue";

const conn = process.env.AZQ_CONNECTION_STRING;
const parts = Object.fromEntries(conn.split(";").filter(Boolean).map((p) => {
  const i = p.indexOf("=");
  return [p.slice(0, i), p.slice(i + 1)];
}));
const service = QueueServiceClient.fromConnectionString(conn);
const cred = new StorageSharedKeyCredential(parts.AccountName, parts.AccountKey);
const checked = [];
const step = async (name, fn) => {
  await fn();
  checked.push(name);
};

const queue = service.getQueueClient("jsqueue");
await step("create queue with metadata", async () => {
  await queue.create({ metadata: { team: "js" } });
  const props = await queue.getProperties();
  assert.equal(props.metadata.team, "js");
  assert.equal(props.approximateMessagesCount, 0);
});

await step("send, peek, receive, update, delete", async () => {
  const sent = await queue.sendMessage("hello from js", { messageTimeToLive: -1 });
  assert.match(sent.messageId, /^[0-9a-f-]{36}$/);
  assert.equal(sent.expiresOn.toISOString(), "9999-12-31T23:59:59.000Z");
  const peeked = await queue.peekMessages({ numberOfMessages: 32 });
  assert.equal(peeked.peekedMessageItems.length, 1);
  assert.equal(peeked.peekedMessageItems[0].messageText, "hello from js");
  assert.equal(peeked.peekedMessageItems[0].dequeueCount, 0);
  const got = await queue.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 30 });
  assert.equal(got.receivedMessageItems.length, 1);
  const m = got.receivedMessageItems[0];
  assert.equal(m.dequeueCount, 1);
  const upd = await queue.updateMessage(m.messageId, m.popReceipt, "updated", 0);
  await queue.deleteMessage(m.messageId, upd.popReceipt);
  const after = await queue.peekMessages();
  assert.equal(after.peekedMessageItems.length, 0);
});

await step("stale receipt is 404 MessageNotFound", async () => {
  const sent = await queue.sendMessage("x");
  const got = await queue.receiveMessages();
  await assert.rejects(queue.deleteMessage(sent.messageId, sent.popReceipt), (e) => {
    assert.equal(e.statusCode, 404);
    assert.equal(e.code, "MessageNotFound");
    return true;
  });
  await queue.deleteMessage(got.receivedMessageItems[0].messageId, got.receivedMessageItems[0].popReceipt);
});

await step("clear and list queues with metadata", async () => {
  await queue.sendMessage("a");
  await queue.clearMessages();
  assert.equal((await queue.getProperties()).approximateMessagesCount, 0);
  const names = [];
  for await (const q of service.listQueues({ prefix: "js", includeMetadata: true })) {
    names.push(q.name);
    assert.equal(q.metadata.team, "js");
  }
  assert.deepEqual(names, ["jsqueue"]);
});

await step("service properties round trip", async () => {
  // A new account's, as Azure has them: hour metrics on, kept 7 days.
  const fresh = await service.getProperties();
  assert.equal(fresh.hourMetrics.enabled, true);
  assert.equal(fresh.hourMetrics.includeAPIs, true);
  assert.equal(fresh.hourMetrics.retentionPolicy.days, 7);
  assert.equal(fresh.minuteMetrics.enabled, false);
  const rule = { allowedOrigins: "https://app.example", allowedMethods: "GET,PUT", allowedHeaders: "x-ms-meta-*",
    exposedHeaders: "x-ms-request-id", maxAgeInSeconds: 60 };
  await service.setProperties({ cors: [rule] });
  const props = await service.getProperties();
  assert.equal(props.cors.length, 1);
  assert.deepEqual({ ...props.cors[0] }, rule);
  // What it read it sets again, unchanged.
  await service.setProperties({ cors: props.cors });
  assert.deepEqual({ ...(await service.getProperties()).cors[0] }, rule);
  await service.setProperties({ cors: [] });
});

await step("stored access policies, one without a policy", async () => {
  // The SDK always sends an AccessPolicy, empty here; the answer has
  // none for that identifier, as Azure's has, which the SDK reads as
  // undefined.
  await queue.setAccessPolicy([{ id: "empty", accessPolicy: {} }, { id: "partial", accessPolicy: { permissions: "r" } }]);
  const acl = await queue.getAccessPolicy();
  assert.equal(acl.signedIdentifiers.length, 2);
  assert.equal(acl.signedIdentifiers[0].id, "empty");
  assert.equal(acl.signedIdentifiers[0].accessPolicy, undefined);
  assert.equal(acl.signedIdentifiers[1].accessPolicy.permissions, "r");
  // Set again what it read (the SDK's setAccessPolicy needs an object
  // where it read undefined), unchanged.
  await queue.setAccessPolicy(acl.signedIdentifiers.map((s) => ({ id: s.id, accessPolicy: s.accessPolicy ?? {} })));
  const again = await queue.getAccessPolicy();
  assert.deepEqual(again.signedIdentifiers.map((s) => [s.id, s.accessPolicy?.permissions]), [["empty", undefined], ["partial", "r"]]);
  await queue.setAccessPolicy([]);
});

await step("service SAS", async () => {
  const now = new Date();
  const sas = generateQueueSASQueryParameters({
    queueName: "jsqueue",
    permissions: QueueSASPermissions.parse("rap"),
    startsOn: new Date(now.getTime() - 60_000),
    expiresOn: new Date(now.getTime() + 3_600_000),
  }, cred).toString();
  const viaSAS = new QueueServiceClient(`${parts.QueueEndpoint}?${sas}`).getQueueClient("jsqueue");
  await viaSAS.sendMessage("by sas");
  const peeked = await viaSAS.peekMessages();
  assert.equal(peeked.peekedMessageItems[0].messageText, "by sas");
  await assert.rejects(viaSAS.clearMessages(), (e) => {
    assert.equal(e.statusCode, 403);
    return true;
  });
});

await step("service stats on the secondary endpoint", async () => {
  const secondary = new QueueServiceClient(parts.QueueEndpoint.replace(/\/$/, "") + "-secondary", cred);
  const stats = await secondary.getStatistics();
  assert.equal(stats._response.status, 200);
  // Azure's document, as the REST reference and the other SDKs have it.
  assert.match(stats._response.bodyAsText,
    /^<\?xml version="1\.0" encoding="utf-8"\?><StorageServiceStats><GeoReplication><Status>live<\/Status><LastSyncTime>[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT<\/LastSyncTime><\/GeoReplication><\/StorageServiceStats>$/);
  await assert.rejects(secondary.getQueueClient("jsqueue").sendMessage("x"), (e) => {
    assert.equal(e.statusCode, 403);
    assert.equal(e.code, "InsufficientAccountPermissions");
    return true;
  });
});

await step("delete queue", async () => {
  await queue.delete();
  await assert.rejects(queue.getProperties(), (e) => e.statusCode === 404);
});

console.log(JSON.stringify({ ok: true, checked }));
