# The catalog: PostgreSQL holding topics, offsets, producer and group state. Offsets
# exist nowhere else, so the database replicates synchronously (RDS Multi-AZ, or
# Aurora), is encrypted, and keeps backups.

locals {
  aurora = var.engine == "aurora-serverless"
  host   = local.aurora ? aws_rds_cluster.this[0].endpoint : aws_db_instance.this[0].address
  major  = split(".", var.postgres_version)[0]
}

# TLS only: the server refuses connections without it (rds.force_ssl), and Strata
# verifies the server's certificate and name (sslmode=verify-full in catalog_url).
resource "aws_db_parameter_group" "this" {
  count       = local.aurora ? 0 : 1
  name_prefix = "${var.name}-"
  family      = "postgres${local.major}"
  description = "Strata catalog: TLS required."
  tags        = var.tags

  parameter {
    name  = "rds.force_ssl"
    value = "1"
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_rds_cluster_parameter_group" "this" {
  count       = local.aurora ? 1 : 0
  name_prefix = "${var.name}-"
  family      = "aurora-postgresql${local.major}"
  description = "Strata catalog: TLS required."
  tags        = var.tags

  parameter {
    name  = "rds.force_ssl"
    value = "1"
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "random_password" "master" {
  length  = 32
  special = false # it goes into URLs and PGPASSWORD unescaped
}

# username, password, host, port, dbname: the shape RDS Proxy and rotation expect.
resource "aws_secretsmanager_secret" "master" {
  name_prefix = "${var.name}-catalog-"
  description = "Strata catalog credentials (${var.name})."
  tags        = var.tags
}

resource "aws_secretsmanager_secret_version" "master" {
  secret_id = aws_secretsmanager_secret.master.id
  secret_string = jsonencode({
    engine   = "postgres"
    username = var.username
    password = random_password.master.result
    host     = local.host
    port     = 5432
    dbname   = var.database_name
  })
}

resource "aws_db_subnet_group" "this" {
  name       = var.name
  subnet_ids = var.subnet_ids
  tags       = var.tags
}

resource "aws_security_group" "db" {
  name_prefix = "${var.name}-db-"
  description = "Strata catalog: Postgres from Strata nodes and the proxy."
  vpc_id      = var.vpc_id
  tags        = var.tags

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_ingress_rule" "clients" {
  for_each                     = toset(var.client_security_group_ids)
  security_group_id            = aws_security_group.db.id
  referenced_security_group_id = each.value
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  description                  = "Postgres from Strata nodes"
}

resource "aws_vpc_security_group_ingress_rule" "self" {
  security_group_id            = aws_security_group.db.id
  referenced_security_group_id = aws_security_group.db.id
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  description                  = "Postgres from RDS Proxy (which shares this group)"
}

resource "aws_vpc_security_group_egress_rule" "self" {
  security_group_id            = aws_security_group.db.id
  referenced_security_group_id = aws_security_group.db.id
  ip_protocol                  = "tcp"
  from_port                    = 5432
  to_port                      = 5432
  description                  = "RDS Proxy to the database"
}

# RDS for PostgreSQL, Multi-AZ.
resource "aws_db_instance" "this" {
  count                        = local.aurora ? 0 : 1
  identifier                   = var.name
  engine                       = "postgres"
  engine_version               = var.postgres_version
  instance_class               = var.instance_class
  allocated_storage            = var.allocated_storage_gb
  storage_type                 = "gp3"
  storage_encrypted            = true
  multi_az                     = true
  db_name                      = var.database_name
  username                     = var.username
  password                     = random_password.master.result
  db_subnet_group_name         = aws_db_subnet_group.this.name
  parameter_group_name         = aws_db_parameter_group.this[0].name
  vpc_security_group_ids       = [aws_security_group.db.id]
  backup_retention_period      = var.backup_retention_days
  deletion_protection          = var.deletion_protection
  skip_final_snapshot          = !var.deletion_protection
  final_snapshot_identifier    = var.deletion_protection ? "${var.name}-final" : null
  auto_minor_version_upgrade   = true
  performance_insights_enabled = true
  publicly_accessible          = false
  tags                         = var.tags
}

# Aurora PostgreSQL Serverless v2: a writer and a reader in different AZs, so a
# failover promotes a warm instance.
resource "aws_rds_cluster" "this" {
  count                           = local.aurora ? 1 : 0
  cluster_identifier              = var.name
  engine                          = "aurora-postgresql"
  engine_mode                     = "provisioned"
  engine_version                  = var.postgres_version
  database_name                   = var.database_name
  master_username                 = var.username
  master_password                 = random_password.master.result
  db_subnet_group_name            = aws_db_subnet_group.this.name
  db_cluster_parameter_group_name = aws_rds_cluster_parameter_group.this[0].name
  vpc_security_group_ids          = [aws_security_group.db.id]
  storage_encrypted               = true
  backup_retention_period         = var.backup_retention_days
  deletion_protection             = var.deletion_protection
  skip_final_snapshot             = !var.deletion_protection
  final_snapshot_identifier       = var.deletion_protection ? "${var.name}-final" : null
  tags                            = var.tags

  serverlessv2_scaling_configuration {
    min_capacity = var.aurora_min_acu
    max_capacity = var.aurora_max_acu
  }
}

resource "aws_rds_cluster_instance" "this" {
  count                = local.aurora ? 2 : 0
  identifier           = "${var.name}-${count.index}"
  cluster_identifier   = aws_rds_cluster.this[0].id
  engine               = aws_rds_cluster.this[0].engine
  engine_version       = aws_rds_cluster.this[0].engine_version
  instance_class       = "db.serverless"
  db_subnet_group_name = aws_db_subnet_group.this.name
  publicly_accessible  = false
  tags                 = var.tags
}

# RDS Proxy (optional): pools connections for Lambda.
data "aws_iam_policy_document" "proxy_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["rds.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "proxy_secret" {
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [aws_secretsmanager_secret.master.arn]
  }
}

resource "aws_iam_role" "proxy" {
  count              = var.enable_proxy ? 1 : 0
  name_prefix        = "${var.name}-proxy-"
  assume_role_policy = data.aws_iam_policy_document.proxy_assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy" "proxy" {
  count  = var.enable_proxy ? 1 : 0
  role   = aws_iam_role.proxy[0].id
  policy = data.aws_iam_policy_document.proxy_secret.json
}

resource "aws_db_proxy" "this" {
  count                  = var.enable_proxy ? 1 : 0
  name                   = var.name
  engine_family          = "POSTGRESQL"
  role_arn               = aws_iam_role.proxy[0].arn
  vpc_subnet_ids         = var.subnet_ids
  vpc_security_group_ids = [aws_security_group.db.id]
  require_tls            = true
  idle_client_timeout    = 1800
  tags                   = var.tags

  auth {
    auth_scheme = "SECRETS"
    iam_auth    = "DISABLED"
    secret_arn  = aws_secretsmanager_secret.master.arn
  }
}

resource "aws_db_proxy_default_target_group" "this" {
  count         = var.enable_proxy ? 1 : 0
  db_proxy_name = aws_db_proxy.this[0].name

  connection_pool_config {
    max_connections_percent      = 90
    max_idle_connections_percent = 10
    connection_borrow_timeout    = 30
  }
}

resource "aws_db_proxy_target" "this" {
  count                  = var.enable_proxy ? 1 : 0
  db_proxy_name          = aws_db_proxy.this[0].name
  target_group_name      = aws_db_proxy_default_target_group.this[0].name
  db_instance_identifier = local.aurora ? null : aws_db_instance.this[0].identifier
  db_cluster_identifier  = local.aurora ? aws_rds_cluster.this[0].cluster_identifier : null
}
