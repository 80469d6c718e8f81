// docs/flows.md's worked example: an invoice that waits for three reports,
// rendered in parallel in another topic (on a Redis Cluster, another
// slot); its handler attaches what they returned.
//   build/example_invoice_flow [redis-url]
#include <redisched/client.h>
#include <redisched/worker.h>

#include <chrono>
#include <future>
#include <iostream>
#include <string>

int main(int argc, char** argv) try {
  redisched::ClientOptions options;
  options.redis_url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
  redisched::Client client(options);
  const std::string parts[] = {"usage", "credits", "taxes"};

  // The invoice first: it waits, blocked, for reports not put yet.
  redisched::JobSpec invoice;
  invoice.id = "invoice_42";
  invoice.body = "customer 42";
  for (const auto& part : parts) invoice.after.push_back({"reports", "report_42_" + part});
  client.put("invoices", invoice);
  std::cout << "invoice_42 is " << to_string(client.get("invoices", "invoice_42")->state)
            << std::endl;

  for (const auto& part : parts) {
    redisched::JobSpec report;
    report.id = "report_42_" + part;
    report.body = part;
    report.keep = std::chrono::minutes(10);  // (done before the invoice names it: still read)
    client.put("reports", report);
  }

  std::promise<std::string> sent;
  redisched::Worker worker(client);
  redisched::HandlerOptions three;
  three.concurrency = 3;
  worker.handle("reports", three, [](redisched::JobContext& job) {
    job.set_result(std::string(job.body()) + ".pdf");
  });
  worker.handle("invoices", {}, [&](redisched::JobContext& job) {
    std::string attached;
    for (const auto& report : job.dependencies()) attached += " " + report.value;
    sent.set_value("sending the invoice of " + std::string(job.body()) + " with" + attached);
  });
  worker.run();  // (the worker also hands the reports' outcomes over)
  std::cout << sent.get_future().get() << std::endl;
  worker.cancel(std::chrono::seconds(5));
  return 0;
} catch (const redisched::Error& e) {
  std::cerr << "example_invoice_flow: " << e.what() << "\n";
  return 1;
}
