CREATE FUNCTION memory_bm25_saturation(tf integer, dl integer) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN tf * 2.2::float8 / (tf + 1.2::float8 * (0.25::float8 + 0.75::float8 * dl / 8.0::float8));
