export { EngramCheckpointSaver, type EngramCheckpointSaverOptions } from "./saver.js";
export { EngramStore, type EngramStoreOptions } from "./store.js";
export { CrossLanguageSerializer } from "./serde.js";
