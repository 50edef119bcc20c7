// Run by vitest (the validation suite's runner): `npx vitest run --globals --dir test/validation`.
import { validate } from "@langchain/langgraph-checkpoint-validation";
import initializer from "./initializer.mjs";

validate(initializer);
