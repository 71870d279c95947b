// Sends one message to each of the queues jsbusy and jslost with
// @azure/storage-queue and its default retry policy (up to four tries,
// the first retry at once), against the server whose connection string is
// in AZQ_CONNECTION_STRING; server/jssdk_test.go has the server answer the
// first Put to jsbusy with 503 ServerBusy and lose the answer to the first
// Put to jslost after putting the message. Prints what the SDK returned.
import { QueueServiceClient } from "@azure/storage-queue";

const service = QueueServiceClient.fromConnectionString(process.env.AZQ_CONNECTION_STRING);
const out = {};
for (const name of ["jsbusy", "jslost"]) {
  const queue = service.getQueueClient(name);
  await queue.create();
  const sent = await queue.sendMessage("from js to " + name);
  out[name] = sent.messageId;
}
console.log(JSON.stringify(out));
