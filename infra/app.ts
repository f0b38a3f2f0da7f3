/**
 * The CDK app: `npx cdk synth` / `npx cdk deploy` (cdk.json runs this file
 * with tsx). Settings come from context or the environment (infra/app-props.ts).
 * An invalid setting is reported as the list of problems, without a stack
 * trace, and the app exits 1.
 */
import { App, Validations } from "aws-cdk-lib";
// cdk-nag is CommonJS built by jsii; import the module object rather than named exports.
import cdkNag from "cdk-nag";
import { stackPropsFrom } from "./app-props.js";
import { ArchiverStack } from "./archiver-stack.js";
import { StackSettingsError } from "./settings.js";

try {
  const app = new App();
  const { stackName, props } = stackPropsFrom((key) => app.node.tryGetContext(key), process.env);
  new ArchiverStack(app, stackName, {
    description:
      "Pulpitum serverless archiver: discovery schedule, SQS work queue and DLQ, worker and replay functions, archive bucket",
    ...props,
  });
  Validations.of(app).addPlugins(
    new cdkNag.AwsSolutionsChecks(app, { verbose: true }),
    new cdkNag.ServerlessChecks(app, { verbose: true }),
  );
  app.synth();
} catch (error) {
  if (!(error instanceof StackSettingsError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
